// Package chaintest runs the whole list-watch chain in one process for the chain-wide tests of
// package proptest, and says what every HTTP watch of it must receive.
//
// A Chain is package chain's assembly serving pods only: an in-memory store, an in-process etcd gRPC
// client, the etcd3 storage of pods, a watch cache over it (unless Options.Uncached) and the HTTP
// API on a loopback port. Its clocks are fake
// where the tests need to drive time: HTTPClock (watch timeouts), CacheClock (the Cacher: bookmarks,
// progress requests, relist delays) and optionally the store's. A gate between the Cacher and the
// storage lets a test end the reflector's watch and hold its re-watch (ForceRelist, the
// Reflector* methods). Close stops everything the chain started and waits for it.
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
// Watch is an HTTP watch as a client reads it (pausable, disconnectable); MemPeak samples the heap
// for the fault tests' memory reports. Every wait is a condition polled with a generous deadline
// (testutil.Poll and testutil.WaitTimeout), moving fake clocks through a step function where the
// awaited thing needs them.
package chaintest
