// Package proptest holds listwatch's property and fault tests: random operations against the store
// and the whole chain, judged by models that share no code with what they judge. The package has
// no API; its models are in the packages below it: storemodel (a naive store.Store and the state
// machine that drives both), kubemodel (what a Kubernetes watch must deliver, shared with etcd3's
// and cache's property tests) and chaintest (the chain in one process, and the frames each of its
// HTTP watches must carry).
//
// TestMain raises rapid's default to 1000 checks per property unless -rapid.checks (or
// RAPID_CHECKS) says otherwise; the properties that build a chain or run a workload per check keep
// a smaller default of their own (withChecks). It runs goleak after the tests, so every test here
// also holds that whatever it started (chain, store, watches, clients) has ended.
//
// # Properties
//
//   - TestStoreMatchesModel: every answer and every watch stream of store.Store is the model's, for
//     random puts, deletes, txns, ranges, compactions, leases on a fake clock, watch streams,
//     cancels, progress requests and overflowing bursts (package storemodel lists the invariants;
//     fuzz's FuzzStoreOps runs the same machine).
//   - TestCheckerReferenceMatchesStore: the checker's reference model (package check/etcd) is etcd's
//     semantics as the store has them. Seeded workloads of both kinds (package workload) pass
//     etcd.Check over etcdgrpc; the linearization found, replayed one request at a time into a
//     fresh store with requests that break one of etcd's request-shape rules (package etcdrules)
//     slipped in, passes too, and that store's watch delivers exactly the checker's reference event
//     log of both histories.
//   - TestChainWatchersMatchModel: every HTTP watch of the whole chain (store, etcd gRPC, etcd3
//     storage, watch cache, HTTP API; a quarter of the checks without the cache) delivers, for one
//     start revision kubemodel allows, a prefix of the initial state, the initial-events-end
//     bookmark and the changes its selectors admit, with bookmarks never going back nor passing an
//     undelivered event, or exactly the ERROR 410, 504 or 500 the model predicts; a stream ends
//     only cleanly, a watch whose timeout passed ends, a client that re-watches from its last
//     resourceVersion gets the rest or a 410; and once every client has read all it must and
//     disconnected, no handler holds a storage watch. Writes go through HTTP or straight into the
//     store, with writes to other keys, compactions, forced relists, paused and disconnected
//     clients, watch timeouts and bookmark ticks among them.
//   - TestChainUnreadClientsMatchModel: the same judgement of every stream, with clients that read
//     nothing in quiet namespaces and nodes (watches narrowed by the path's namespace, a
//     metadata.name selector or the spec.nodeName trigger, some replaying more state than the
//     connection holds) while other namespaces get bursts of writes; besides, a watch without
//     bookmarks that the watch cache offered at most 10 events since it registered (kubemodel's
//     Dispatch and Offered: upstream's Cacher offers a watcher only the events of its request's
//     scope or trigger value) must still be open when its client reads again, as upstream keeps it.
//     A witness watch that reads everything fences which writes were dispatched before a watch
//     registered. It fails when the cache registers a namespace's watch cluster-wide.
//
// # Fault tests
//
// Each breaks one thing on purpose and holds that nobody else loses anything (the other watches'
// frames are judged by chaintest's Model), that memory stays bounded (the peak is logged) and that
// no goroutine is left behind.
//
//   - TestChainClientDisconnectMidFrame: 300 clients close their watch-list mid-frame, half with a
//     reset; every handler ends and stops its storage watch, three clients reading meanwhile get
//     every event exactly, and the live heap grows by less than 32 MiB.
//   - TestChainShutdownWith1000Watches: shutting the server down as `listwatch serve` does ends
//     1000 caught-up watches cleanly, each having delivered every event, with no storage watch left
//     open.
//   - TestChainCompactionDuringCatchUp: a compaction lands while a watch replays history; over the
//     etcd3 storage (storage) the watch delivers an exact prefix then 410, or everything, and
//     re-watches get the model's 410, 500 or the rest; under the cache (reflector) the reflector's
//     re-watch gets 410, the cache relists, and its HTTP watchers get what the model says. The
//     test ticks the store itself, once the re-watch is its one unsynced watcher, so that exactly
//     one catch-up batch precedes the compaction whatever the schedule.
//   - TestChainLeaseExpiry: when the store's fake clock passes the lease of pods written with a
//     TTL, every watcher selecting them gets DELETED (the last state, at the deletion revision) in
//     key order, and every other event still arrives; with and without the cache.
//   - TestChainQuietNamespaceClientKept: a client of namespace a that reads nothing while its watch
//     replays 20 large pods is kept open through 40 writes in namespace b, and then gets all of a's
//     events: the deterministic case of TestChainUnreadClientsMatchModel.
//   - TestChainStuckReader: a client that stops reading is closed by the Cacher after an exact
//     prefix, without an ERROR, while the clients that read get every event exactly, and the
//     chain's live heap grows by less than half of what the stuck client missed.
//
// With -short TestChainShutdownWith1000Watches shuts down with 250 watches and TestChainStuckReader
// writes 300 pods (its heap figure taken after 75), the properties' checks are a tenth.
//
// The live heap these bounds judge is chaintest.LiveHeap: two collections, so that what the
// sync.Pools held (as much as the schedule happened to need at once) is freed, not counted; with
// one collection TestChainStuckReader's figure varied by up to 5 MiB from run to run.
//
// The judges are tested apart: kubemodel's TestCheckRejectsWrongStreams and chaintest's
// TestCheckJudgesFrames and TestCheckErrors show them refusing wrong streams. No test injects a
// fault into the chain itself to show TestChainWatchersMatchModel failing, nor into the store to
// show TestStoreMatchesModel or TestCheckerReferenceMatchesStore failing.
package proptest
