// Package kube checks a Kubernetes API server the way package etcd checks an etcd
// store: a seeded workload of writes, lists and watches runs against one namespaced resource in a
// namespace of its own, a Recorder writes down what the wire said, and Check holds the history to
// the apiserver's guarantees. It is what `listwatch check --kube URL` runs. It imports nothing of
// what it judges (store, etcdgrpc, watch, cache, httpwatch, chain): its reference is the API concepts
// document (https://kubernetes.io/docs/reference/using-api/api-concepts/, "Resource versions",
// "Semantics for get and list", "Semantics for watch", "Watch bookmarks", "Streaming lists") and
// k8s.io/apiserver v0.37.2's code, cited where a rule comes from it. It is its own package, not a
// part of package etcd (check/etcd), because its histories have another shape (objects by name
// with resourceVersions, HTTP statuses, watch frames) and share none of that model; what the two
// checkers do share is package check's (the directory above): Guarantee and its Info, the core of
// a Violation, Verdict, ReadJSON and WriteJSON, the workload's Load bounds, counts by outcome and
// coverage counts.
//
// # API
//
//   - History, Operation, Watch, Frame, Object, ListOptions, ListResult, Status are the input, in
//     Go or JSON (History.WriteJSON, ReadJSON; History.Validate's errors wrap ErrInvalidHistory)
//     (TestCheckJSONRoundTrip: a history survives the round trip, its Run (check.Run) too,
//     malformed ones are refused, one whose Run has another schema version with
//     check.ErrUnsupportedSchema).
//     IsHistory tells such JSON from package etcd's, for `listwatch check --check-history`
//     (TestIsHistory).
//   - Check(h, Options) returns a *Result: the Verdict of the linearizability search, the
//     Violations (each names its Guarantee, the operation or the watch and frame, and what was
//     expected and received), the Linearization, the reference write log (Writes), the Coverage
//     (lists by resourceVersion semantics, watches by start, resumed watches, events replayed,
//     bookmarks, initial-events-end bookmarks, 410s) and Notes. Result.Err wraps ErrViolation
//     (TestCheckMutations) or ErrInconclusive. WriteReport(w, h, res, *ReportInput) writes it as
//     check.WriteReport's HTML page (BuildReport builds it): the verdict, the run (History.Run
//     unless ReportInput.Run), each violation with links to the frame, watch and request it is
//     about, a timeline of the requests (a row per client) and of each watch's call and frames (a
//     row per watch) with their full JSON, the coverage and the write log (TestWriteReport). Options.Phase is told each part of the check as
//     it begins (check.PhaseSearch, PhaseLists, check.PhaseWatches), for a progress line
//     (TestCheckPhases).
//   - CheckContext(ctx, h, Options) is Check stopped by ctx (Check is it with
//     context.Background()): once ctx ends, the part running (porcupine's search through
//     check.Stoppable, the replay, the lists and gets, the watches) stops and it returns an error
//     wrapping ctx.Err() naming the part, beginning no other (TestCheckContextStops); uncancelled it
//     finds what Check does (TestCheckContextUncancelled).
//   - Guarantees lists the guarantees in this comment's order, each with whether it needs the
//     write log; CheckedOver says what a result checked each over, History.Counts counts the
//     requests by verb and outcome (check.NameCount), Coverage.Counts lists the coverage as the
//     report shows it: `listwatch check --kube` prints them (TestCounts).
//   - Discover(ctx, *rest.Config, GroupVersionResource) reads a resource's kind from discovery;
//     NewRecorder(*rest.Config, Resource, clock) records requests to it in Resource.Namespace:
//     Create, Update (its uid and resourceVersion are preconditions), Delete (with Precondition),
//     Get, List, Watch (a WatchStream: Next, Stop), ReadInitial (the namespace's content, the
//     check's starting state), Namespace, DeleteNamespace, DeleteObjects and WaitNamespaceGone
//     (the cleanup after a run, not recorded; `listwatch check --kube`'s TestCheckKubePasses and
//     TestCheckKubeKeep). Requests that get no
//     answer return errors wrapping ErrNoAnswer, and are recorded with an unknown outcome; API
//     errors are their *Status (TestRecorderRecords). An incomplete resource, one the server does
//     not serve and a cluster-scoped one are refused with ErrInvalidConfig (TestRecorderRefuses).
//   - Run(ctx, *Recorder, Config) runs the seeded workload (Config.Validate's errors wrap
//     ErrInvalidConfig and name the field: TestConfigValidate); Stats follows it while it runs.
//
// # The workload
//
// Clients contend for a few names (obj-0 ...): creates; updates by PUT with the uid and
// resourceVersion they read (from a cached copy or a get), retried on 409; deletes with a
// resourceVersion (and uid) precondition or none; gets at "", "0" and N; lists of every
// resourceVersion semantics (unset, "0", Exact N, NotOlderThan N, legacy N, N=1 far in the past,
// and combinations the apiserver refuses), limits of 1-3 and 500, label and field selectors,
// following continue tokens (sometimes with resourceVersion "0", allowed, or N, refused). Every
// write sets a bucket label (which selectors select on) and a write annotation unique in the run,
// so each object state names the write that made it. Watchers start as reflectors (list, then watch
// from its resourceVersion), streaming lists (sendInitialEvents=true), legacy starts from "" and
// "0", from now (sendInitialEvents=false), from a past N or from 1, with or without
// allowWatchBookmarks and selectors, with timeoutSeconds of 2-7 s; they resume from the last
// resourceVersion delivered (an event's, a bookmark's, never an initial event's) a few times, and
// start afresh after a 410. The first watcher is a witness: one unfiltered watch from before the
// first write, always resumed, so that every delete (answered by a Status without a resourceVersion
// for built-in types) is seen at its resourceVersion. At the end the watches get time to catch up
// (until none received a frame for 0.5 s) before they are stopped. The workload passes against
// listwatch's chain (TestRunAgainstChain) and against the upstream apiserver (interop's
// TestKubeCheckUpstreamAPIServer); what it covers is logged (Result.Coverage), not asserted.
//
// # Guarantees
//
//   - linearizable: the writes and the consistent reads (get and list with resourceVersion unset)
//     are linearizable against a model of a namespaced resource: objects by name, each with its
//     uid, resourceVersion and content; a create succeeds if and only if the name is free (else 409
//     AlreadyExists), an update or delete if and only if the object exists (else 404) and its
//     preconditions hold (else 409 Conflict); each write that takes effect takes a resourceVersion
//     above every earlier one, and a consistent read at resourceVersion M shows the state after
//     every write up to M and none after. The search is porcupine's; a write with no answer may or
//     may not have taken effect, unless some answer or watch shows its state (it did, at that
//     resourceVersion). A delete's resourceVersion is its answer's, or the one watches saw its
//     object's uid deleted at. ("lost write", "stale consistent get", "update that should have
//     conflicted"; TestCheckUnknownOutcome: a write with no answer that a watch showed is placed at
//     its resourceVersion, one nothing showed may not have happened; TestCheckBaseHistory: a delete
//     placed at its watch-seen resourceVersion.)
//   - read_rv: every list's resourceVersion M obeys its semantics: Exact N gives N, NotOlderThan N
//     at least N, a consistent list at least what any request had shown before it was called,
//     continued pages the first page's; no state shows a write called after the read returned; a
//     get at N returns a version not replaced at or before N. Legacy N with a limit is Exact, but
//     not with a metadata.name field selector (the registry lists one key, non-recursively:
//     pkg/registry/generic/registry/store.go ListPredicate). ("exact list at another
//     resourceVersion", "continued page at another resourceVersion", "resourceVersion not a
//     number".)
//   - read_content: a list's items are the state at M its selectors admit (all of them across the
//     pages of a list followed to its end; a part of them otherwise), each page at most limit items
//     when a continue token follows; a get at "0" or N returns a state the object had. ("list not
//     matching its resourceVersion", "continued pages that repeat an item".)
//   - watch_start: a watch from N starts after N; one with initial events (sendInitialEvents=true,
//     or resourceVersion unset or "0" without it: WatchList defaulting) sends ADDED events that are
//     the state at some M its semantics allow ("": at least what any request had shown before the
//     call; N: at least N) and that holds no write called after the initial events ended; from now
//     (sendInitialEvents=false), after some such M. ("initial-events-end bookmark not where the
//     initial state is", "initial events not the state".)
//   - watch_replay: after its start, a watch delivers exactly the changes its selectors admit, in
//     order, none missing, none twice, none invented: ADDED when an object enters the selection,
//     MODIFIED while it stays, DELETED when it leaves, carrying the previous state at the event's
//     resourceVersion (pkg/storage/cacher/cache_watcher.go convertToWatchEvent); nothing follows an
//     ERROR. A stream may end anywhere: what it delivered must be a prefix of what is owed.
//     Resumption is the same rule for a watch from the last delivered resourceVersion: exactly the
//     rest, or a 410. ("dropped event", "reordered events", "duplicated event", "wrong event type
//     on a selector transition", "transition carrying the new object", "event the selector does not
//     admit".)
//   - bookmark: bookmarks only when asked (allowWatchBookmarks), never below a resourceVersion
//     already delivered, never ahead of a pending event (every owed change up to a bookmark's
//     resourceVersion was delivered before it). ("bookmark ahead of a pending event", "bookmark
//     below a delivered event", "bookmark not asked for".)
//   - initial_events_end: the initial-events-end bookmark only on watches with initial events and
//     bookmarks, once, where the initial events end (its resourceVersion is their M); a watch that
//     asked for it explicitly gets it before any change. ("initial-events-end bookmark twice".)
//   - expired: a 410 only for a resourceVersion below the retained window: never to a request that
//     needs no history (lists with semantics other than Exact, watches before their start is
//     established); a watch's as an ERROR event in a 200 stream, not an HTTP 410
//     (pkg/storage/cacher/cacher.go Watch, newErrWatcher); and a window never moves back: once x
//     was answered 410, no request of the same kind (watch, exact read) for x or below called later
//     is served. ("410 inside the window", "410 to a list that needs no history", "410 as an HTTP
//     status".)
//   - validation: options the apiserver refuses (metainternalversion validation's
//     ValidateListOptions, storage.ValidateListOptions' resourceVersion with continue, bad
//     selectors or resourceVersions) are not served. ("refused options served".)
//
// Without a linearization only linearizable, expired, validation and the structural bookmark and
// initial-events-end rules are checked, and a note says so
// (TestNoLinearizationChecksOnlyStructure). At most 5 violations of one guarantee are listed per
// watch or request; a note says more were left out (TestViolationsCappedPerWatch).
//
// # Tests
//
// TestCheckBaseHistory: a hand-written history of every semantics passes. TestCheckMutations: each
// quoted change above, made alone to that history, is caught as a violation of its guarantee that
// says what is wrong. Parts of a rule that none of its quoted changes breaks have no test of their
// own: the 404 and 409 AlreadyExists outcomes, a consistent list's lower bound, gets at N, the page
// size, nothing after an ERROR, resumption, the explicitly requested initial-events-end bookmark
// before any change. TestRunAgainstChain and interop's TestKubeCheckUpstreamAPIServer and
// TestKubeCheckListwatch run the workload and the check against listwatch's chain and the upstream
// apiextensions-apiserver.
//
// # Assumptions
//
// Nobody else writes the resource in the namespace while the run goes (others may write
// elsewhere: resourceVersions need not be consecutive). resourceVersions are decimal numbers
// that grow with every write, as the apiserver's etcd3 storage makes them. The objects the
// workload writes are metadata alone, so the resource must accept those (ConfigMaps, Secrets,
// custom resources that preserve unknown fields or have no required fields). A delete no answer
// and no watch showed the resourceVersion of is placed where the linearization puts it. Lists and
// watches at a resourceVersion before the run's start are judged only after it.
package kube
