// Package workload drives an etcd v3 endpoint with seeded, randomized, concurrent traffic and
// records it through an etcd.Recorder (package etcd, check/etcd), so that the history can be judged
// by etcd.Check. Config.Validate checks its bounds with package check's Load, as package kube's
// workload does. It is what `listwatch check` runs, and tests and interop reuse it against any clientv3 endpoint: the
// in-process store (etcdgrpc.NewClient), a real etcd, or another etcd-compatible store.
//
// # API
//
//   - Run(ctx, rec, Config) runs one workload through rec and returns a Snapshot of what it did.
//     Config names the Kind (K8s or Etcd), the Seed, the number of Clients and Watchers, the bound
//     (Ops, Duration, or neither: until ctx ends), CompactEvery, the RequestTimeout of each
//     request, the Prefix its keys go under, the features to Avoid and the Clock. Config.Validate's
//     errors wrap ErrInvalidConfig and name the field; ParseKind's wrap ErrUnknownKind
//     (TestConfigValidate). Duration is measured on the Clock (TestDurationBound).
//   - With a Prefix the history is an open one (etcd.Recorder.Begin): the store need not be
//     fresh, may hold keys of the prefix already, and others may write outside it meanwhile; the
//     workload reads and watches from the start revision on (TestWorkloadsUnderPrefix: both
//     workloads pass with another client writing all along, its revisions reported as gaps;
//     TestRunBeginsOnce: a recorder that recorded already is refused with etcd.ErrBegun).
//   - Stats counts, safely for concurrent use, what a running workload did: operations by name and
//     outcome (Outcome and NameCount, package check's, which package kube's counts share), watches, watch events, progress notifications. Pass one in Config.Stats to
//     watch a run progress; Stats.Snapshot reads it. Its count of operations is the history's
//     (TestWorkloadsPassInMemory).
//   - Status(ctx, c) asks every endpoint of c its version, revision and member ID.
//   - ProbeCapabilities(ctx, c, ProbeConfig) tries, under a prefix, each Feature of etcd's API a
//     workload may use, and says of each whether the store answers as etcd, REFUSED it or DIFFERS;
//     Capabilities.Avoid is what the workload then does without, and Capabilities.Product names a
//     store that named itself (kine does, in its refusals). A refusal is a finding, never a reason
//     to stop: the probe fails (ErrProbe) only where a plain put is refused
//     (TestProbeInMemoryStore: all as etcd; TestProbeRefusals: refusals quoted, the features that
//     need them not probed, and the workload then runs with what works and passes;
//     TestProbeFailsWithoutPuts). ProbeConfig.Skip leaves out probes of SkippableProbes (those a
//     store is known to crash on, kine v0.14.12 a client-chosen watch ID): they show as skipped,
//     and neither the workload nor the scenarios send a watch that uses them (TestProbeSkip).
//   - RunScenarios(ctx, c, ScenarioConfig) runs Scenarios, a suite of short deterministic sequences,
//     one per guarantee and per known real-world watch bug (Scenario.Mirrors names it), each
//     recorded under a prefix of its own, checked by etcd.Check and labelled by
//     etcd.Classify; a scenario that waits for an answer that never comes (a progress
//     notification, a lease expiry) reports a Finding. TestScenariosPassInMemory: every scenario
//     passes against listwatch's store and together they cover every guarantee;
//     TestScenariosFail: a store that sends prev_kv unasked and leaves RequestProgress unanswered
//     (kine's ways) fails exactly the scenarios for those. ScenarioResult.Status, Errored and
//     Failure say what one found, as `listwatch check` prints it. ScenarioConfig.Stop (an
//     interrupt) skips the scenarios not yet begun, and Starting names each as it begins, for
//     progress (TestScenariosStop). A scenario that restarts the store (Scenario.Restarts:
//     tombstone-after-restart) runs only with ScenarioConfig.Restart, and is skipped, saying why,
//     without; a restart that fails is its error (TestScenarioRestartSkipped). A violation of a
//     scenario that mirrors a known bug is labelled with that bug where Classify gave it another of
//     the same guarantees and signatures and the target has both (etcd 3.4.23 has
//     etcd-compacted-tombstone and etcd-tombstone-after-restart; TestKnownBugsFailEveryRun).
//   - Summarize tallies a check of a store: the labels of its violations and of the scenarios',
//     the scenarios' findings, those that could not run to their end, the capabilities refused or
//     different and what the store said of itself (StatusFindings: a Status without revision).
//     Summary counts the known bugs (each once), the unexplained and the deviations from etcd's
//     API; any of them fails the check (TestSummarize). ForeignKeys notes the keys a store holds
//     outside the run's prefix, which do not fail it; Gated says whether the apiserver sends no
//     RequestProgress to a target.
//   - Known bugs are provoked, not avoided: the workloads use every feature the store does not
//     refuse, whatever its version, and send the triggers on purpose: one client step in 25 is
//     writes followed at once by a RequestProgress on every watch stream (etcd-io/etcd#15220's
//     trigger; the k8s workload's is an update, as the apiserver's consistent read from its cache
//     follows its writes). What a version is known to get wrong is told apart afterwards
//     (etcd.KnownBugs): TestWorkloadsAgainstEtcd and TestWorkloadsAgainstEtcdCluster run against
//     etcd processes and accept only violations of its version's known bugs;
//     TestKnownBugsAreReal reproduces each on a version that has it and sees it labelled.
//   - Every known bug fails a store that has it every run. A buggy store (buggy_test.go:
//     listwatch's store behind client interceptors that give it one bug's behaviour,
//     deterministically; the one with etcd-io/etcd#19179's forgets, on its restart, the tombstones
//     at the compactions made before) fails the scenarios that mirror each etcd.KnownBugs entry, labelled with
//     it, in every one of three runs, and every bug has such a scenario (TestKnownBugsFailEveryRun);
//     the workloads fail one with etcd-io/etcd#15220's behaviour with it alone, three seeds each
//     (TestWorkloadsProvokeProgressAhead); request-progress-not-ahead's watches from the past opened
//     many at once fail one with kine v0.17.0's (a progress notification ahead of a watch's
//     history, k3s-io/kine#731) on those watches (TestProgressAheadOfHistory). The same triggers run against listwatch's own store and
//     gRPC server, which pass (TestScenariosPassInMemory; store's TestRequestProgressAfterBurst and
//     TestRequestProgressAfterQuietCatchUp, etcdgrpc's TestWatchRequestProgressAfterBurst).
//   - TestRecordedHistories records the valid histories package etcd's mutation tests start from
//     (check/etcd/testdata/recorded) and, with -update-recorded, rewrites them: the workloads, some
//     scenarios and a recording whose watches get a txn's events at every kind of place, against
//     listwatch's store and, where installed, Debian's etcd.
//     Avoiding RequestProgress (the apiserver's gating, for `check --apiserver-gating`) sends none
//     (TestAvoidRequestProgress).
//   - The tests run the workloads against real etcd processes too: package internal/etcdprocess
//     starts one member (Start) or a cluster (StartCluster).
//
// # The workloads
//
// K8s is the apiserver's etcd3 storage (k8s.io/apiserver pkg/storage/etcd3/store.go over
// go.etcd.io/etcd/client/v3/kubernetes): objects at /registry/<resource>/<namespace>/<name> whose
// values are JSON objects carrying a generation counter that each update raises; create is a txn
// (mod_revision == 0 ? put), update and delete are optimistic txns (mod_revision == X ? put or
// delete : get) retried from the state the failed txn returned, starting from the client's cached
// copy or a fresh get; events are created with a lease reused for several objects, like the
// apiserver's lease manager; list reads a prefix in pages (limit, then key after the last +
// "\x00"), every page pinned to the revision of the first, and falls back to a full list when a
// page's revision was compacted, as client-go's pager does. Watchers list, then watch the prefix
// from the list's revision + 1 with prev_kv and progress_notify; they end their watch after a drawn
// number of events and resume from the last revision seen + 1, and relist after a compaction
// answer, as a reflector does (TestWatchersResume). With CompactEvery, two compactors (two
// apiservers) run the apiserver's compaction protocol (pkg/storage/etcd3/compact.go): a
// compare-and-swap on the version of compact_rev_key, then a compaction at the revision seen in the
// previous round.
//
// Under a Prefix the k8s workload's keys are <prefix>registry/... and its compactors coordinate
// on <prefix>compact_rev_key (never an apiserver's own); where the store refuses txns but the
// apiserver's shapes (kine), its compactors compact without the protocol's txn.
//
// Etcd is raw etcd v3 traffic over 40 keys (key/00 ... key/39, under the Prefix): ranges with limits, revisions
// (current, past, compacted, future), every sort order and target, serializable, keys-only,
// count-only and revision filters; puts with prev_kv, leases, ignore_value and ignore_lease;
// deletes of a key, a range or a prefix; txns with up to three compares of every target and result
// and branches of reads, puts and deletes (and read-only nested txns); lease grant (server- or
// client-chosen IDs), revoke and keepalive, including on leases that are gone. Watchers watch a
// drawn range (a key, a range, a prefix, from a key) from now or a past revision, with drawn
// prev_kv, progress_notify, filters and fragment; they end after a drawn number of events and
// resume from the last revision + 1, or open a new drawn watch, and resume from the compaction
// revision after every other compaction answer (a watch that starts behind may be compacted again
// before it catches up) and open a new drawn watch after the others (TestWatchersResume). With
// CompactEvery, a compactor compacts at a revision drawn among the recent ones (and sometimes at a
// compacted or a future one). Leases are attached to key/30 ... key/39 only, and a keys-only range
// over them is sorted by value: etcd 3.7 answers other keys-only ranges from its index, without the
// leases, where etcd 3.4 to 3.6 give them, and the workload is meant to pass on both. A lease once
// revoked is never named again (a "lease not found" about a granted lease tells the checker the
// lease may have expired, which widens its search); leases that never existed are. One grant in
// four is of a lease of 2 s (etcd's minimum) with one key on it, left to expire, which the checker
// finds in a revision no request made. Where the store refuses a feature the workload does
// without it: deletes through the apiserver's conditional delete txn where the delete RPC is
// refused, txns of the apiserver's shapes where others are, no leases, sorts, filters, and so on.
//
// Both workloads pass etcd.Check against listwatch's store and do what they are for: watch
// events, resumed watches, compactions, compares lost to other clients (TestWorkloadsPassInMemory);
// against etcd v3.7.3 embedded (interop's TestCheckCommandAgainstEmbeddedEtcd); and against
// Debian's etcd 3.4.23 they find its known bugs and nothing else (TestWorkloadsAgainstEtcd,
// TestWorkloadsAgainstEtcdCluster, interop's TestCheckCommandAgainstEtcd34). BenchmarkWorkload
// measures a run and its check.
//
// # Invariants
//
//   - Determinism. Every client, watcher and compactor draws from its own generator seeded by
//     (Seed, its role and index), and the Ops bound is split among the clients before they start,
//     so each one makes the same choices in every run with the same Seed; what the endpoint answers
//     still depends on how the clients interleave. One client, no watcher and no compaction against
//     a fresh store gives the same history every time (times aside), and another Seed another one
//     (TestDeterministic).
//   - Every request goes through the Recorder, so the history holds all the workload did; nothing
//     else may write to the store (TestWorkloadsPassInMemory: as many operations in the history as
//     in the Stats). Requests run with their own timeout and are not canceled by ctx: when ctx
//     ends, clients stop after their request in flight, which keeps the history's unknown outcomes
//     to real failures (TestStopsWhenContextEnds: none after a stop, and the history passes).
//   - The start. The clients send nothing before every watcher has its first watch created, or has
//     ended an attempt at one (a refused list or watch), so the watches see the traffic they are
//     judged on whatever the schedule (TestClientsStartOnceWatchersWatch).
//   - The end. Once the clients and compactors are done, a final read learns the revision, and each
//     open watch is given time to reach it (by requested progress notifications, or without them
//     until no watch has received an event for half a second) before the watches are closed, so the
//     check can judge each watch up to its end (TestWatchersResume: the watch open at the end
//     reached the final read's revision). The idle wait without RequestProgress has no test of its
//     own.
//   - No leaks. Run starts every goroutine it needs and returns only once all of them have ended
//     (the package's TestMain runs goleak after the tests, which call Run in every mode).
//   - Only the Recorder's history is kept; a failing request is never an error of Run (it is in the
//     history and the Stats: the etcd workload's refused requests in TestWorkloadsPassInMemory),
//     and Run fails only for an invalid Config (TestConfigValidate) or, under a Prefix, when the
//     initial state cannot be read (TestRunBeginsOnce).
package workload
