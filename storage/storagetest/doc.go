// Package storagetest holds listwatch's conformance cases for storage.Interface: scripted scenarios
// ported from k8s.io/apiserver pkg/storage/testing (watcher_tests.go, store_tests.go), each producing
// a transcript of its writes, reads and of the events its watches deliver. A case passes when its
// transcript equals Want. Case.Upstream names the pkg/storage/testing function a case ports (or,
// where upstream has none, the upstream test or function whose behaviour it checks).
//
// The same cases are played against every implementation, as upstream plays pkg/storage/testing
// against both its etcd3 storage and its Cacher. Like upstream's, the suite imports no storage
// implementation: the caller passes the storage under test (Env.NewStorage) and the hooks the cases
// need (Env.Client for raw access to etcd's keys and for compaction, Env.Compact, Env.RequestProgress);
// internal/storagebackend starts the servers and internal/storagebackend/watchsuite wires the etcd3
// storage in. The players:
//
//   - the etcd3 storage on listwatch's in-process store (watch TestConformance and its variants) and
//     on a real etcd (watch TestConformanceEtcd with -etcd; module interop
//     TestWatchConformanceEtcdVsListwatch, which also requires both transcripts to be equal);
//   - the watch cache, a Cacher over the etcd3 storage (cache TestConformance). Where upstream's
//     expectations for its Cacher differ from those for etcd (bookmarks, consistent reads, "too old"
//     answers after a compaction, the Retry-After of a freshness timeout), the cache's test replaces
//     the lines of Want concerned and names the upstream behaviour; the cases upstream cannot play
//     against a cache (a storage that cannot decode, etcd's progress notifications, etcd3-only
//     configuration) it skips with the reason.
//
// Transcripts name revisions relative to the server's revision when the case started ("rv=+3"), so
// cases may share a server; the cases marked Fresh compact or read from revision 1 and need a server
// no other case has written to. Cases run one at a time per server: a watch waiting for a future
// revision keeps etcd from answering the progress requests other cases sync with. Slow cases wait for
// real time: a lease to expire (about 2 s) or a watch deadline of 3 s, as upstream's bookmark tests.
//
// Running the suite:
//
//	env := storagetest.Env{Client: client, NewStorage: func(cfg storagetest.Config) (storage.Interface, error) {
//		return newMyStorage(client, cfg) // under cfg.Prefix+cfg.ResourcePrefix, with cfg's codec and transformer
//	}}
//	for _, c := range storagetest.Cases() {
//		got, err := c.Play(ctx, env)
//		// err: the scenario could not be played; otherwise got must equal c.Want.
//	}
//
// Env.NewStorage builds the storage under test for a Config; a storage with a Close method (the etcd3
// storage) is closed when the case ends, so the caller closes only what it wraps (the etcd3 storage
// under a watch cache). A storage that
// does not forward etcd's progress notifications to its watches, such as the watch cache, also sets
// Env.RequestProgress, with which W.Sync learns that a watch has delivered everything up to a
// revision, and Env.Compact, which compacts it as H.Compact compacts etcd.
//
// Transcripts do not depend on timing: progress bookmarks are not recorded (their number depends on
// timing), a bookmark sent at a time of the storage's choosing is recorded without its revision when
// that lies between the watch's start and the last write, where upstream ignores bookmarks (the
// events after a watch-list is established, RunWatchSemantics) W.NextSkippingBookmarks drops them,
// and where upstream allows several answers
// (a Get from RV 0, an RV "0" list from a cache) the transcript records that the answer is one of
// them.
//
// # Invariants
//
//   - A case never passes by not looking: a deviating event shows in the transcript, and every wait
//     for an event is bounded by Env.Timeout, after which Play returns an error. Sync reads every
//     event up to the revision it waits for, so an unexpected event before it is recorded. Checked by
//     watch TestPlayFailsOnDeviation.
//   - Every watch a case opens is stopped and drained when Play returns, so no goroutine of the case
//     outlives it. Checked by goleak in the TestMain of every package that plays the cases.
package storagetest
