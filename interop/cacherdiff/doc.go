// Package cacherdiff holds the differential test of the watch caches: k8s.io/apiserver v0.37's
// Cacher (pkg/storage/cacher, behind its CacheDelegator, over upstream's etcd3 storage) and
// listwatch's cache (over listwatch's etcd3 storage), both over one listwatch store, both built by
// interop/internal/cachepair with the same configuration, fed the same seeded random history and
// the same random requests. The package has no API: everything is in its tests. The watch pairs
// (segments, resumes, judging and comparing the streams) are interop/internal/diffrun's, shared
// with httpdiff; the test supplies the caches as its Peers.
//
// The test keeps these rules:
//
//   - Same history. Creates, updates (labels, node, phase) and deletes of pods in three namespaces
//     of unequal traffic (the third is quiet), written through either cache at random, and
//     compactions of etcd, which both caches observe as upstream's compactor does
//     (cachepair.Cache.ObserveCompaction). Every write is recorded in the model of
//     proptest/kubemodel.
//   - Same requests, same answers. Before every read both caches are brought to etcd's revision by
//     a consistent list (itself compared), so that reads of any staleness see one state. Lists with
//     every resourceVersion (unset, 0, current, in the history, before the caches' list or the
//     compaction, future, malformed), resourceVersionMatch (unset, NotOlderThan, Exact, unknown),
//     limit and continue (following the tokens for a few pages, sometimes with a resourceVersion),
//     label and field selectors; gets; and writes that must fail (create of an existing object,
//     update or delete of an absent one, failed preconditions, a resourceVersion on create): the
//     answers must be equal: objects, list metadata, continue tokens, and errors with their status
//     code, reason, message, details and Retry-After.
//   - Same events. Watches of the resource, a namespace or one object, with every resourceVersion,
//     sendInitialEvents unset, true or false, bookmarks or not, label and field selectors (the
//     spec.nodeName trigger included), the apiserver's request context (namespace, name), some with
//     a deadline, some read by a slow reader that pauses for tens of writes, stopped at random once
//     they delivered what they owe. Every watch of each cache is judged by the model (every event
//     exactly as upstream's semantics require; bookmarks never below a delivered event nor at or
//     past a pending one); a watch a cache closes early (a slow reader, a deadline) is resumed, as
//     a client does, from the last resourceVersion it saw, and must deliver exactly the rest or a
//     410. The streams of both caches, without the bookmarks whose timing is each cache's own, must
//     be equal. A cache may close a slow reader only if upstream's dispatcher could have: upstream
//     offers a watcher only the events of its scope (namespace and name, or trigger value) and
//     never closes one offered minWatchChanSize events or fewer.
//   - Real clocks. Both caches run on the real clock (cachepair.PollClock fires only the snapshot
//     compactor's poll): upstream's Cacher takes its dispatch budget and its dispatch timer from the
//     real clock whatever its Config.Clock (cacher.go newTimeBudget, time.NewTimer), so a fake clock
//     would make the two block differently; what timing decides (bookmarks, terminations) is judged
//     by the guarantees above, not compared.
//
// Running it: `go test ./cacherdiff/` runs the default seeds (1-3, 250 operations each: the
// seeds.Config of TestCacherDifferential). LISTWATCH_CACHERDIFF_SEEDS sets the seeds ("7", "1-200", "3,9-12") and
// LISTWATCH_CACHERDIFF_OPS the operations per seed, for long runs:
//
//	LISTWATCH_CACHERDIFF_SEEDS=1-200 go test -race -run TestCacherDifferential -timeout 2h ./cacherdiff/
//
// Every difference names its seed; TestCacherDifferential's log gives the counts of what was
// compared.
package cacherdiff
