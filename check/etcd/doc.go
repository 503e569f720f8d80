// Package etcd checks a recorded history of an etcd v3 client session against etcd's
// consistency and watch guarantees, the way porcupine checks a history against a model: the KV
// operations must be linearizable with etcd v3.7's semantics, as this package's own reference model
// has them (below), and every watch must keep the guarantees etcd's robustness tests check
// (tests/robustness/validate/watch.go), judged against the event log of the linearization found.
// The checker imports nothing of what it judges: not listwatch's store, nor its gRPC server; only
// package etcdrules, etcd's error values, request-shape rules and request and response types,
// which the store shares (History's parts are those types with Bytes; their JSON form is below),
// and package check (the directory above), what it shares with package kube (check/kube), the
// Kubernetes API checker: Guarantee and its Info, the core of a Violation, Verdict, the JSON
// reading, the counts of requests by outcome and of coverage.
//
// # API
//
//   - History, Operation, Watch and their parts are the input, in Go or in JSON (below).
//   - Check(h, Options) verifies a history and returns a *Result: the Verdict of the
//     linearizability search, the Violations found (each naming its Guarantee, the operation or the
//     watch and response, the revision, and a go-cmp diff of expected against received), the
//     Linearization found and the reference event log (Events). Result.Err wraps ErrViolation
//     (TestEachMutationBreaksExactlyItsGuarantee, which also requires each violation to say where
//     it is; TestLinearizability/stale_read shows the diff) or ErrInconclusive (TestTimeout).
//     Check's own error wraps ErrInvalidHistory for a malformed history, naming the first problem
//     (TestInvalidHistories), or ErrModelDivergence for a bug of this package (no test can provoke
//     it; every test that checks a history fails on it).
//   - WriteReport(w, h, res, *ReportInput) writes check.WriteReport's HTML page of a checked
//     history (BuildReport builds it): the verdict, the run (ReportInput.Run, else History.Run:
//     target, version, seed), each violation with its known-bug label (ReportInput.Labels, else
//     Classify against the run's store and version), its diff and links to the timeline items it
//     concerns (its operation and the operations overlapping it on one of its keys, its watch
//     response or the watch's last, and the writes that made its events: the operation whose
//     answer's revision is the event's), the scenario results and coverage the command passes, a
//     timeline of every operation (a row per client) and watch response (a row per watch) whose
//     full text holds whole keys and values, the reference event log and porcupine's
//     visualisation (TestReportOfFailingHistory: every link names an item;
//     TestReportLinksConcurrentOperations, TestReportFullKeys, TestReportOfPassingHistory). Short
//     descriptions cut a long key or value in the middle, keeping its end.
//   - Recorder records a History from any clientv3 endpoint: Begin makes it an open history under a
//     prefix (Recording, below; a second Begin is ErrBegun), Do sends a request, Watch runs a
//     watch, RequestProgress asks the watches for progress notifications, History returns what was
//     recorded. It is safe for concurrent use: each operation in flight has a client lane of its
//     own (TestRecorderConcurrentUse); its times come from an injectable clock. Histories recorded
//     through clientv3 from the store served by etcdgrpc pass (TestRecorderWithClientv3).
//   - ReadJSON, History.WriteJSON and History.Validate read, write and validate the JSON form
//     (TestJSONRoundTrip, TestReadJSONErrors, TestExampleHistory). History.Run (check.Run), set by
//     the program that recorded the history, says what its verdict depends on besides it (the
//     target's version decides which violations are known bugs); a Run of another schema version
//     is refused with check.ErrUnsupportedSchema (TestReadJSONErrors).
//   - IsDefiniteError tells an error after which a request certainly changed nothing
//     (TestRecorderUnknownOutcome); DescribeRequest and DescribeOutcome describe an operation on
//     one line (used in violations and the report; no test of their own).
//   - ExampleCheck and ExampleCheck_violation show a history built in Go being checked.
//   - Options.IgnoreVersions compares answers and events without key versions, for a store that
//     keeps none (kine), judging the rest of each (TestIgnoreVersions). Options.Phase is told each
//     part of the check as it begins (check.PhaseSearch, PhaseReplay, check.PhaseWatches), for a
//     progress line (TestCheckPhases).
//   - CheckContext(ctx, h, Options) is Check stopped by ctx (Check is it with
//     context.Background()): once ctx ends, the part running (the sweep, porcupine's search through
//     check.Stoppable, the replay, the watch checks) stops within check.PollEvery steps and it returns
//     an error wrapping ctx.Err() naming the part, beginning no other (TestCheckContextStops,
//     TestSearchContextStops: no model step after the cancel); uncancelled it finds what Check does
//     (TestCheckContextUncancelled).
//   - Guarantees lists the guarantees in this comment's order, each with whether it needs a
//     reference (the linearization's event log); CheckedOver says what a result checked each over,
//     History.Counts counts the operations by request type and outcome (check.NameCount),
//     CountWatches what the watches received: `listwatch check` prints them (TestCounts).
//   - Result.Coverage counts what the history exercised (progress notifications, compaction
//     answers, reads below, at and above the revision window, compactions, lease expiries, gaps;
//     Coverage.Add sums them, Coverage.Counts lists them as check.Counts);
//     Result.Gaps lists the revisions an open history's writes did not make
//     (TestOpenHistoryWithForeignWrites).
//   - Each Violation carries a Signature (the Sig constants) and the Events at fault. KnownBugs are
//     public upstream bugs with the signature of their violations (Known bugs, below); Classify
//     labels a result's violations for a Target (a product and its version), a version with the
//     fix making the match a regression, and TallyLabels counts them (TestClassify,
//     TestClassifyNeedsTheSignature). An event a watch receives twice is etcd-progress-ahead only
//     above a progress notification that came below an event it had, the revision clientv3 resumes
//     a broken stream from (TestClassifyResentAfterProgressBelow).
//
// # Recording
//
// A closed history starts on an empty store (revision 1) and holds every write made to it. An open
// one (Recorder.Begin) names a key prefix, the revision it started at and the state of the prefix's
// keys there (read by one range, not an operation of the history); every request and watch names
// keys under the prefix only (Validate refuses others, and a txn reading below the start revision,
// TestOpenHistoryValidate), and others may write outside it while it runs. For each
// operation it gives the call and return times (int64 nanoseconds from an origin shared by the
// whole history, from a monotonic clock), the request and either the response or the error. An
// error is definite when it is one of etcd's errors that mean the request was refused (package
// etcdrules' values: "etcdserver: key is not provided", "etcdserver: mvcc: required revision has
// been compacted", ...); any other failure (a timeout, a lost connection, a canceled context) must
// set Unknown: the request may or may not have taken effect (TestRecorderUnknownOutcome records
// both). Each watch gives the time it was called, its request and every response it received, in
// order, with the time it was received. The created response (clientv3 WithCreatedNotify) tells at
// which revision a watch from 0 starts; without it the first revision is guessed as etcd's tests
// guess it (no test records a watch without it).
//
// # JSON form
//
// encoding/json of History, with the field names of the struct tags: snake_case names after etcd's
// protobuf fields. An open history has "prefix", "start_revision" and "initial" (the keys of the
// prefix at the start revision, in key order, as KeyValues). Enums are strings: event types "PUT" and "DELETE"; watch filters "NOPUT" and
// "NODELETE"; sort orders "NONE", "ASCEND", "DESCEND"; sort targets "KEY", "VERSION", "CREATE",
// "MOD", "VALUE"; compare results "EQUAL", "GREATER", "LESS", "NOT_EQUAL"; compare targets
// "VERSION", "CREATE", "MOD", "VALUE", "LEASE". Keys, range ends and values (Bytes) are JSON
// strings when they are valid UTF-8 and {"base64": "<standard base64>"} otherwise; both forms are
// read. A request is an object with exactly one of "range", "put", "delete_range", "txn",
// "compact", "lease_grant", "lease_revoke", "lease_keep_alive"; a response has "revision" (the
// header revision) and the body named like the request, which may be left out when empty. A
// recorded history has "run" (check.Run: "schema", "tool", "target", "store", "version",
// "capabilities", "workload", "seed", "flags", "started", "interrupted"); one written by hand may
// leave it out. Unknown
// fields are rejected (TestBytesJSON, TestReadJSONErrors; TestJSONRoundTrip: a recorded history
// survives WriteJSON and ReadJSON unchanged). testdata/history.json is a complete example, checked
// by TestExampleHistory:
//
//	{"operations": [
//	  {"client": 0, "call": 20, "return": 25, "request": {"put": {"key": "a", "value": "1"}},
//	   "response": {"revision": 2}},
//	  {"client": 1, "call": 70, "return": 75, "request": {"range": {"key": "a", "revision": 2}},
//	   "error": "etcdserver: mvcc: required revision has been compacted"},
//	  {"client": 0, "call": 80, "return": 85, "request": {"put": {"key": "c", "value": "1"}},
//	   "error": "context deadline exceeded", "unknown": true}],
//	 "watches": [
//	  {"client": 2, "call": 5, "request": {"key": "a", "range_end": "d", "prev_kv": true},
//	   "responses": [
//	    {"time": 6, "revision": 1, "created": true},
//	    {"time": 24, "revision": 2, "events": [{"type": "PUT", "kv": {"key": "a",
//	      "create_revision": 2, "mod_revision": 2, "version": 1, "value": "1"}}]},
//	    {"time": 120, "revision": 7}]}]}
//
// # Linearizability
//
// Linearizable: there is an order of the KV operations, each placed between its call and its
// return, in which each one's outcome is what the reference semantics give: the same response
// (header revision included) or the same definite error (TestLinearizability: sequential histories,
// a stale read, a lost write, a concurrent read that sees either state, a wrong revision, definite
// and shape errors). Compared: every field of every response, with a nil body read as empty, except
// lease TTLs and a keepalive's header revision (filled when the answer is sent)
// (TestLeaseGrantGetsItsID, TestLinearizability/leases); a range sorted by a target other than the
// key may order equal sort keys any way etcd's unstable sort could (exercised by
// TestWildSequentialHistoriesPass, whose ranges use every sort; no test of its own). An
// unknown-outcome write may take effect at any point after its call, including after everything
// else, which is how "it did not happen" is expressed: such writes, after the last operation of
// known outcome, are left out of the linearization and of the reference log
// (TestLinearizability/unknown_outcome; TestValidHistoriesPass turns write responses into unknown
// outcomes and adds unknown writes that never arrived; TestExampleHistory places one).
// Unknown-outcome reads are ignored (TestLinearizability/unknown_read_is_ignored). Result.Unknown
// counts the requests of unknown outcome and, when there is a linearization, what it decided of
// each write of them: took effect (its replay made a change, which later reads or watch events
// needed) or not (left out, or placed where it changed nothing); without one, none is decided
// (TestUnknownOutcomesResolved). Serializable: a
// serializable range, or a txn whose top-level ops are all serializable ranges (an empty txn
// included), which etcd serves from a member's local state (server/etcdserver/v3_server.go Txn,
// IsTxnSerializable), is not ordered in real time; it must be the answer of the store at its header
// revision in the linearization found (TestSerializableReadMayBeStale,
// TestSerializableTxnMayBeStale).
//
// The linearization is found in two stages. First a sweep (sweep.go) walks the calls and returns
// in time order and places each operation where its answer's revision says: a write that changed
// something when the store moves to the revision it claims (each revision has one creator), every
// other answered operation while the store is at its header revision, a failed one or a keepalive
// at a point where its outcome holds. An operation that changes nothing and fits when it is called
// is placed then (that loses no linearization); what the revisions leave open is decided greedily:
// which unknown-outcome write or lease expiry made a revision no answer claims (with unknown
// outcomes, the first whose changes agree with every watch covering that revision; the store must
// reach each watch's highest revision by the time the watch saw it, and each serializable read's
// header revision before it returned), which compaction, grant, revoke or unknown-outcome request
// must come first for an operation to fit, and, in an open history, whether one made the last
// revision of one of the last gaps (repairGap, which replays what was placed since). A stuck sweep
// runs again with its last choice of the write or expiry that made a revision changed to the next
// candidate (chronological backtracking by restarts, at most 16). Every placement is a step of the
// model, between the operation's call and return, so a sweep that places every operation of known
// outcome has a linearization. With unknown-outcome writes it is accepted only if every
// serializable read is the answer of its state at the read's header revision (the sweep asks
// only that the revision be reached); else porcupine decides (TestSerializableReadChoosesUnknownWrite).
// A revision no answer claims but a range answer shows a key put at was made by an
// unknown-outcome write of the history that put that key and value, never by others
// (TestSweepPlacesUnknownWriteAnAnswerShows).
// It is O(n log n) in the operations (the sort of calls and returns; each operation is placed
// once) plus, for each revision no answer claims, the unknown-outcome writes that may have written
// a key a watch saw there (BenchmarkCheckSize, BenchmarkCheckUnknown). When it gets stuck, two
// operations whose revisions order them against real time (one answered at a revision before the
// other's, though the other returned before it was called) prove there is no linearization, and
// the violation names both (TestLinearizability/stale_read_with_its_old_revision), and so does an
// answer at a revision below the store's first (TestLinearizability/header_revision_0); otherwise
// a note says where the sweep got stuck and porcupine searches (github.com/anishathalye/porcupine),
// in one partition, as below, within what is left of Options.Timeout. TestSweepAgreesWithPorcupine holds the sweep's verdict, where it
// gives one, and Check's to porcupine's alone on recorded histories, on the same with unknown
// outcomes, and on perturbed ones (a header revision off by one, an operation moved earlier, a
// failure for a success); it also requires the sweep to decide every faithfully recorded history.
//
// Porcupine's search uses a model whose states are immutable: a persistent treap of the keyspace
// plus a snapshot per revision linked by jump pointers, hashed incrementally, so that forking,
// caching and comparing states is cheap; two states are equal, and hash alike, exactly when their
// keyspace, leases, compaction and whole revision history are (TestStateEquality). The linearization
// found, by either stage, is replayed on the model, which must accept every operation where it was
// placed (else ErrModelDivergence, a bug of this package); its changes are the reference event log.
// Three things keep the search small: a response's revision says at which store revision the
// operation can take effect (a put at r+1, a read at r, and so on), so operations are tried only
// there; a revision a successful response shows its request created cannot be taken by an
// unknown-outcome write; and, when there are unknown-outcome writes, a first guided search asks
// that such a write create a revision only with exactly the events each watch covering that
// revision received there, that the store reach each watch's highest revision before the watch saw
// it, and that each serializable read fit the store at its header revision some time before it
// returned (if that finds nothing, an unguided search follows, so the checks that follow can name
// the watch or the read at fault). Leases never expire on their own in the model, except that every
// lease whose TTL may have run out before the history ends may expire at any time after its grant
// plus its TTL, shown or not (TestLeaseExpiry: a revision nobody made that watches saw as deletes of
// a lease's keys passes, and so does an expiry only a later read shows, in a closed and an open
// history; a put nobody made does not). A grant with server-chosen ID whose outcome is unknown is
// assumed to have created no lease anyone used (no test of its own). Options.Timeout bounds the
// search: a search that cannot finish in time gives VerdictTimeout, not a verdict (TestTimeout).
//
// # Open histories
//
// Against a store others write to, revisions are opaque increasing numbers: between two operations
// of the history the store may have moved on by any number of revisions made outside the prefix.
// The model's state keeps the prefix's keys and the store's revision apart: an operation whose
// answer shows a later revision moves the store there first (a write that changed something ran on
// the revision before its answer's, anything else at its answer's), and nothing else may: a revision
// never goes back, a write never takes a revision another write's answer shows, reads of the
// prefix see exactly its writes (TestOpenHistoryViolations: a stale read, a revision going back, a
// watch missing an event of the prefix all fail). The runs of revisions no write of the history
// made are Result.Gaps. What the history cannot show is not judged: reads below the start
// revision (a note counts them), watch events at or below it, whether a compaction at or below it
// succeeds (the store may have been compacted before), a compaction answer naming a compaction no
// request made (another client's: a note), and a progress notification above every revision the
// history saw.
//
// # Reference model
//
// The model (model.go over state.go) is written from etcd v3.7: server/etcdserver/txn (range.go
// executeRange, put.go, delete.go, txn.go compareToPath, checkTxn and executeTxn) over
// server/storage/mvcc (kvstore_txn.go storeTxnWrite, key_index.go) and server/lease/lessor.go;
// request-shape errors are package etcdrules' (v3rpc/key.go). A state is the keyspace of every
// revision since the first, the compact revision and the live leases. Every rule below is held to
// listwatch's store by TestWildSequentialHistoriesPass and proptest's
// TestCheckerReferenceMatchesStore (Evidence, below); a rule with a test of its own names it.
//
//   - Writes. A write that changes something raises the revision by one; its events (PUT with
//     create and mod revision, version and lease; DELETE with the key and mod revision) follow its
//     execution order. A put's version is one more than the key's, its create revision kept unless
//     the key did not exist in the txn's view (its own earlier writes included). Deleting nothing,
//     reads, failures, lease grants, keepalives and compactions keep the revision.
//   - Txns. Every compare, of nested txns on the chosen branches too, reads the state at the txn's
//     start; a compare over a range holds when it holds for every key, and one on a missing key
//     compares zero values (a value compare on a missing key fails); the chosen branch is checked
//     in full before anything is written (txn.go checkTxn); reads inside the txn see its own
//     writes. etcd's quirk is kept: a delete whose range end is "\x00" is the empty interval to
//     v3rpc's checkIntervals, so a txn may put a key and delete it in one revision, giving a PUT
//     and a DELETE event of one key at one revision, which is not a duplicate
//     (TestPutThenDeleteInOneTxn); a put with ignore_value or ignore_lease after such a delete
//     fails with ErrKeyNotFound (etcd would panic applying it; no test of its own).
//   - Ranges. limit, count, more, the revision filters, keys_only (which drops the lease too
//     unless sorted by value, as v3.7 serves it from its index) and count_only as executeRange
//     does; a range with a sort target but SortNone sorts ascending by that target, and its limit
//     is applied before the sort, to the first keys in key order (rangeLimit reads the request's
//     SortNone as the default ordering). Ties of a sort by another target are accepted in any order
//     etcd's unstable sort.Sort could give.
//   - Compaction. Compacting at C fails with ErrCompacted unless C is above the compact revision,
//     and with ErrFutureRev above the current revision; afterwards a read below C fails with
//     ErrCompacted and one at C works (TestLinearizability/definite_errors_must_be_right). For each
//     key etcd keeps its newest version at or below C, and a tombstone only if it is at exactly C
//     (v3.6+, key_index.go compact), so a watch from C still receives every event at C: the model
//     keeps every revision and owes them all; a watch from below a completed compaction is owed the
//     compacted answer (the compaction guarantee). TestPrevKVAndCompaction watches from the
//     compaction revision.
//   - Leases. A grant creates the lease with the ID the request or the response names
//     (ErrLeaseExists if it lives); a put attaches its key to a lease that must live
//     (ErrLeaseNotFound), and a put without a lease detaches it; a revoke deletes the lease's keys
//     in key order in one revision (none if it has no keys) and then the lease; a keepalive of a
//     missing lease fails with ErrLeaseNotFound. TTLs are not modelled: leases never expire but
//     where the history shows they may have (Linearizability, above), and then no sooner than
//     their TTL (the larger of the one asked for and the one granted) after their grant was called
//     (TestLinearizability/leases, TestLeaseGrantGetsItsID, TestLeaseExpiry).
//   - Events. The reference log's prev_kv is what etcd's watch sends (v3rpc/watch.go sendLoop reads
//     the key at the event's revision - 1): the key's version before the write, none if it had
//     none, and none for a PUT that creates its key (TestPrevKVAndCompaction).
//
// # Evidence
//
// The model is held to etcd by tests, not by shared code: TestWildSequentialHistoriesPass (random
// requests, shape errors included, sent one at a time to listwatch's store while a watch with
// prev_kv runs: the history must pass and the model's event log must be what the watch received);
// proptest's TestCheckerReferenceMatchesStore (seeded concurrent workloads over etcdgrpc, every
// checked linearization replayed into a fresh store with shape probes slipped in, answers and event
// log compared with the model's); etcdrules' tests (the shape rules and error wording against
// etcd's); and the workloads run against a real etcd (workload's TestWorkloadsAgainstEtcd and
// TestWorkloadsAgainstEtcdCluster, where only the known bugs of Debian's etcd 3.4.23 show, and
// interop's TestCheckCommandAgainstEmbeddedEtcd, where nothing does). That the
// checker catches what it must is judged by mutation (Mutations, below); that it accepts what it
// must, TestScenarioPasses, TestValidHistoriesPass, TestSmokeSequential, TestRecorderWithClientv3
// and TestMutationsAtEveryPosition (faithfully recorded histories pass); the examples
// (ExampleCheck, ExampleCheck_violation) show a history built in Go being checked.
//
// # Mutations
//
// mutate_test.go lists the corruptions a store could commit to a response or a watch stream: drop,
// duplicate, reorder, shift or split an event or a txn's events, resend a response, invent an
// event; drop, alter or add a prev_kv; shift the created revision, a write's header or a read's;
// a progress notification behind an event, ahead of pending events (and the watch then ended),
// beyond the history or going backwards; a compaction answer undeserved, missing, at the wrong
// revision or followed by a response; a lease expiry in the wrong revision; a stale read, a lost
// write, a serializable read of a value never stored, a put's prev_kv dropped or altered, a past
// read or a compaction refused as compacted. Each names the guarantee it must be reported under,
// those it may break besides by its nature (an event moved up a revision is both missing and
// invented), and the kinds of position it cannot apply at, with the reason. Where a corruption is
// undetectable in principle at a place, the mutation's places leave it out, saying why in a
// comment: a watch's last event with nothing after it (it may still have been on its way), a
// prev_kv a compaction may have removed, a compaction answer in an open history (another client
// may have compacted), a lease expiry's only DELETE (without it the history shows no expiry), a
// serializable read's error (no header to place it at).
//
//   - TestMutationsAtEveryPosition applies every mutation at the first and the last place of each
//     kind of position (a watch's first events, within a revision of a compaction or beside a
//     compaction answer, right after a progress notification, a watch's last events; for KV
//     answers the first, the first after a compaction, the last) of every history in
//     testdata/recorded, which pass unmutated, and requires its guarantee reported and no other
//     but those allowed; every kind a mutation does not exclude must be found in some history.
//     The histories are recorded by workload's TestRecordedHistories (-update-recorded): both
//     workloads, some scenarios and a recording that puts a txn's events at every kind of place,
//     against listwatch's store and against Debian's etcd 3.4.23 (spared RequestProgress, the
//     trigger of its known bugs; its recording of every kind of place fails on them and is not
//     kept); and by interop's TestRecordEmbeddedEtcdHistories, the workloads and scenarios against
//     embedded etcd 3.7.3.
//   - TestEachMutationBreaksExactlyItsGuarantee applies each at its first and last place in a
//     hand-made scenario (notInScenario names those it gives no place, and why), and
//     TestMutatedHistoriesFail at random places of random workloads, with the same judgement.
//
// # Watch guarantees
//
// Each watch is checked on its own. Its first revision F is its start revision, or for a watch
// from 0 its created revision + 1; such a watch's event at its created revision itself is not
// judged, as etcd 3.7.3 reads that revision after registering the watcher and delivers a write
// committed in between (TestEventAtCreatedRevision). Its last revision L is the highest of its last event's revision
// and its highest progress notification. Its owed events are the reference events at revisions
// in [F, L] whose key is in the watch's range and whose type its filters keep. An event is
// identified by (revision, key, type): etcd can emit a PUT and a DELETE of one key at one revision
// (a txn that puts a key, then deletes it with a range ending in "\x00", which etcd's
// checkIntervals allows). An event that breaks filter, unique or ordered is judged no further.
//
// Each guarantee names, in quotes, mutations of mutate_test.go that break it (Mutations, above).
// (The KV ones: linearizable, "stale read", "lost write", "shift a write's header revision",
// "read header beyond the history", "drop a put's prev_kv", "corrupt a put's prev_kv", "past read
// answered compacted", "compaction refused as compacted"; serializable, "serializable read of a
// value never stored".)
//
//   - filter: every event's key is in the watched range and its type is not filtered out ("event
//     outside the watched range", "event of a filtered type").
//   - unique: no event arrives twice (more often than the reference has it at its revision)
//     ("duplicate an event", "resend a response"; TestPutThenDeleteInOneTxn: a PUT and a DELETE of one key at one
//     revision are two events).
//   - ordered: event revisions never decrease ("swap two responses").
//   - atomic: no revision is split: a response's first event is at a revision after the previous
//     response's last event ("split a revision between responses").
//   - bookmarkable: progress notifications never go backwards, are never below an event already
//     received, never above a revision the history reached, and every event after one is above it
//     ("progress notification behind an event", "progress notification ahead of pending events",
//     "progress notification beyond the history", "progress going backwards"; workload's
//     TestKnownBugsAreReal/etcd-progress-ahead,
//     on an etcd with that bug, one ahead of the events still to come).
//   - first_revision: no event is below F ("event below the first revision").
//   - genuine (nothing invented): every event is in the reference log ("invent an event", "shift an
//     event up a revision", "lease expiry in the wrong revision").
//   - resumable: the first event received is the first owed event ("drop the first event",
//     "created revision behind").
//   - reliable: after the first, the events received are the owed ones, in order, within a revision
//     too, none missing up to L; and each equals the reference event (type, key, value, create and
//     mod revision, version, lease) ("drop an event", "drop a txn's events", "reorder a txn's
//     events", "progress notification ahead, then the watch ends", "corrupt an event's value";
//     TestExampleHistory). An event of a key that a later event of the same key follows in its
//     revision C is not owed once a compaction at exactly C may have run before the watch received
//     what followed: etcd's compaction keeps of each key its newest revision at or below C, so a
//     watch reading C from the history gets a txn's DELETE of a key without the PUT before it
//     (TestCompactionWithinRevision).
//   - is_create: an event's is-create (create revision == mod revision) is the reference's: true
//     exactly when the key did not exist at the previous revision ("wrong is-create").
//   - prev_kv: prev_kv is present if and only if the watch asked for it (one not asked for is judged
//     without the reference, like the structural guarantees), except for an event that
//     creates its key (never one) and an event at revision r for which a compaction at or above r
//     may have run before the response was received (etcd then omits it silently); when present it
//     is the key's value at r-1 ("corrupt a prev_kv", "drop a prev_kv", "prev_kv not asked for",
//     "prev_kv of a created key"; TestPrevKVAndCompaction: missing only after a
//     compaction, present only when asked for).
//   - compaction: a watch answered "compacted at C" must need a revision below C (its next
//     revision: after its last event or progress notification, else F) and there must be a
//     compaction at C requested before; a watch from R below a compaction that completed before the
//     watch was called must be answered "compacted" before it receives any event or progress
//     notification; nothing follows a compaction answer ("compaction answer the watch did not
//     deserve", "missing compaction answer", "compaction answer at the wrong revision", "response
//     after a compaction answer"). What cannot be known is not judged: a compaction
//     concurrent with the watch's creation may or may not cancel it (no test of its own).
//
// Without a linearization (or when the search times out) only filter, unique, ordered, atomic,
// bookmarkable, compaction and a prev_kv not asked for are checked, since the others need the
// reference, and a note says so
// (TestNoLinearizationChecksOnlyStructure). At most 20 violations of one guarantee are listed per
// watch; Result.Notes counts the rest (TestViolationsCappedPerWatch).
//
// # Known bugs
//
// KnownBugs lists, for etcd and kine, the public bugs whose violations have a signature this
// package can tell: etcd's requested progress notification ahead of pending events
// (etcd-io/etcd#15220: an event after a progress notification at or above it, a notification
// below an event, or, when the watch ended before the events came, events missing below a
// notification it received, a compaction answer for the revision after one, or a progress
// notification to a watch from a compacted revision before its compaction answer; and on a watch
// with periodic notifications a notification going back, a periodic one made before a requested
// one and sent after it, as three 3.4.23 members showed), etcd's compaction
// at a delete dropping the tombstone (etcd-io/etcd#18089, #19179: missing DELETEs at exactly a
// compaction revision the watch started at or before), kine's progress notifications ahead of
// events (k3s-io/kine#731, fixed in v0.16.5 and v0.17.1; a kine bug is judged by kine's own release,
// Target.StoreVersion, since kine reports the etcd version it emulates: TestClassify) and its refusal of a watch from exactly the compaction revision
// (k3s-io/kine#747, served by v0.16.5, v0.17.1 and v0.17.2 only: TestKineBugsReleases); etcd-progress-unsynced (etcd-io/etcd#17507) has no signature: the scenarios
// that wait for the answer name it. Each bug says the versions it affects and those that fixed it.
// Every one has a scenario (package workload) that provokes it on purpose, and a store with its
// behaviour fails that scenario, labelled with it, every run (workload's TestKnownBugsFailEveryRun;
// TestWorkloadsProvokeProgressAhead for the workloads and etcd-io/etcd#15220's trigger).
// KnownCrashes lists the public bugs that kill the store, which no history shows: kine v0.14.11
// and v0.14.12 panic in watcher.CancelEarly (k3s-io/kine#606); the zoo tells them by the panic
// (TestKnownCrash).
//
// # Complexity
//
// Preparing the search and the replay are linear in the history (times log of the keyspace), and
// so is the sweep, after sorting the calls and returns: a history whose revisions order it is
// checked in O(n log n), some ten thousand requests a second and more of a whole check
// (BenchmarkCheckSize: 10k, 100k and 1M requests; BenchmarkCheckUnknown: 100k requests with up to
// 10k unknown outcomes; `listwatch check --workload etcd` checks what it recorded in less time than
// it took to record it). Porcupine's search, needed only where the sweep gets stuck, is NP-hard in
// general and quadratic at best (its cache keys on the set of operations placed); Options.Timeout
// bounds it. The watch checks are linear in the events received plus, per watch, the reference
// events at the revisions it covers (a one-key watch reads only its key's events): O(E + W·L) for E
// events received, W watches and L events in the reference log, at some millions of events a
// second (BenchmarkWatchCheck; BenchmarkCheck measures a whole check of sequential puts;
// TestSyntheticHistoryPasses and TestConcurrentHistoryPasses check that their histories pass).
//
// # Assumptions
//
// A closed history began on an empty store at revision 1 and no one else wrote to it; an open one
// began with the initial state it names, and no one else wrote under its prefix. The store enforces
// etcd's default limits (1.5 MiB requests, 128 ops per txn); in a closed history compactions are
// requested by the history's clients (etcd's auto-compaction would not be in it).
package etcd
