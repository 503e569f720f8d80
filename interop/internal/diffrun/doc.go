// Package diffrun is the runner the seeded differentials share (interop/cacherdiff: upstream's
// Cacher and listwatch's cache; interop/httpdiff: a real apiserver and listwatch's chain over
// HTTP): the watch pairs, the same watch sent to both peers, each peer's watches judged by a model
// of its writes (proptest/kubemodel), a watch a peer closes resumed as a client does, and the two
// streams compared. A differential implements Peers (its two peers' names and models, how a watch
// is sent to each, how an event is rendered for the comparison, what an early close is held to) and
// keeps its own history, reads and writes; interop/internal/seeds plays its seeds.
//
// # Invariants
//
//   - Every difference is reported through Failf, prefixed with the seed, and names the watch
//     ("watch N of ..."), the peer and, for what a peer's model forbids, the segment (1 the first
//     request, then each re-watch) (TestModelViolationNamesSegment); two streams that differ as
//     Describe renders them are reported with the diff, naming both peers (TestDifferentStreamsReported);
//     refusals are compared with what the other peer answered (TestRefusalsCompared).
//   - A segment a peer closes before it delivered what it owes is counted, handed to Peers.Closed,
//     and resumed from the last resourceVersion the client saw (or started over when closed during
//     its initial events: then the pair's streams are judged, not compared); the resumed streams of
//     both peers compare equal when they deliver the same events (TestSameStreams).
//   - Bookmarks other than the initial-events-end one are judged by the model, never compared: their
//     timing is each peer's own. A re-watch refused as too old (410) cuts the other peer's stream to
//     the same length.
//   - Play stops a seed after 20 differences, naming the seed (TestPlayStopsAfterManyDifferences);
//     Future allows a seed two requests for a revision not yet written (TestFuture).
//   - Every segment's reader is owned by the runner: Finish and StopAll stop it and wait for it; a
//     paused reader (Pause) reads again at UnpauseDue, Finish or Stop.
package diffrun
