// Package chaintest runs the whole list-watch chain in one process for the chain-wide tests of
// package proptest, and says what every HTTP watch of it must receive.
//
// A Chain is package chain's assembly serving pods only: an in-memory store, an in-process etcd
// gRPC client, the etcd3 storage of pods, a watch cache over it (unless Options.Uncached) and the
// HTTP API on a loopback port. Its clocks are fake where the tests need to drive time: HTTPClock
// (watch timeouts), CacheClock (the Cacher: bookmarks, progress requests, relist delays) and
// optionally the store's. A gate between the Cacher and the storage lets a test end the reflector's
// watch and hold its re-watch (ForceRelist, the Reflector* methods). Close stops everything the
// chain started and waits for it.
//
// A Model records every pod write in a kubemodel.History, by reading the store after each one (the
// caller is the only writer), and for a watch request opened at a given moment computes an
// Expectation: the HTTP API's defaulting of the request, then kubemodel's ExpectCache (or
// ExpectStorage, uncached) with what the model knows of the chain (etcd's revision, the cache's
// last relist and known revision, the last compaction). Model.Check reads a watch's frames
// (objects as canonical JSON; a BOOKMARK must be an empty v1 Pod, an ERROR a v1 Status) and judges
// them by kubemodel's History.Check; the Verdict says whether the prefix is complete and which
// resourceVersion a client resumes from. Model.Dispatch says where the watch cache indexes the
// watcher of a request (kubemodel.DispatchOf), so a test can count the writes offered to it.
//
// Watch is an HTTP watch as a client reads it (pausable, disconnectable; OpenPausedWatch opens one
// whose client reads nothing until Resume); MemPeak samples the heap
// for the fault tests' memory reports. Every wait is a condition polled with a generous deadline
// (testutil.Poll and testutil.WaitTimeout), moving fake clocks through a step function where the
// awaited thing needs them.
//
// # Invariants
//
//   - Frames are judged as a client reads them: an object is compared as a JSON value, whatever its
//     encoding; a BOOKMARK must be an empty v1 Pod (c.newFunc() with a resourceVersion, as
//     pkg/storage/cacher/cacher.go makes them, and at most the k8s.io/initial-events-end annotation
//     of pkg/storage/util.go AnnotateInitialEventsEndBookmark), an ERROR a v1 Status; kubemodel's
//     refusals (a gap, other content, a bookmark passing a pending event, a missing end bookmark,
//     an unexpected ERROR) come through (TestCheckJudgesFrames).
//   - Model.Expect is what the chain must answer: the HTTP API's WatchList defaulting, then, with a
//     cache, 410 "too old resource version: N (L)" below the last relist L
//     (pkg/storage/cacher/watch_cache_history.go) and the 504 "Too large resource version" of a
//     watch-list from the future (pkg/storage/errors.go NewTooLargeResourceVersionError); without
//     one, after a compaction, 410 below it and the 500 of an event whose previous value was
//     compacted (pkg/storage/etcd3/event.go parseEvent); a wrong code, message or trailing frame is
//     refused (TestCheckErrors).
//   - Close stops everything the chain started and waits for it (proptest's TestMain runs goleak
//     after every chain test); Shutdown ends every HTTP watch cleanly
//     (TestChainShutdownWith1000Watches). OpenWatches counts the storage watches the HTTP handlers
//     hold, which the chain tests require to fall to zero once their clients have gone
//     (TestChainWatchersMatchModel, TestChainClientDisconnectMidFrame).
//   - ForceRelist brings the Cacher to relist as a reflector that fell behind a compaction does,
//     through its re-watch's 410 (TestChainWatchersMatchModel's relist action); BreakReflectorWatch
//     and HoldReflector hold the re-watch for a test that places the compaction itself
//     (TestChainCompactionDuringCatchUp/reflector); DescribeReflector tells their state for a
//     failure message.
package chaintest
