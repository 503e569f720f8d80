// Package check holds what listwatch's two checkers share: package etcd (check/etcd), which holds
// a recorded etcd v3 client session to etcd's guarantees, and package kube (check/kube), which holds
// a recorded Kubernetes API session to the apiserver's. Each checker has its own history, model and
// guarantees; what they have in common is here, once, and both use it:
//
//   - Guarantee names a property a checker verifies; Info says of one whether it NeedsReference
//     (is judged against the log a linearization gives, so that without one it is Skipped, or
//     judged in part). Each checker lists its guarantees in its doc.go's order (etcd.Guarantees,
//     kube.Guarantees) and says what each was checked over (etcd.CheckedOver, kube.CheckedOver).
//     List names guarantees as the command line prints them (TestViolated, TestVerdicts).
//   - Violation is what every violation says: its guarantee, the operation or watch it is about
//     (-1 when not about one) and a message. A checker's violation embeds it and adds its own
//     parts (a watch's response or frame, a diff, what was expected); Where and Line locate it the
//     same way for both ("watch 3 frame 2", "operation 7"); Violated lists the guarantees
//     violated, each once, in the checker's order, and Tally counts violations by guarantee
//     (TestViolationWhere, TestViolated).
//   - Verdict is the outcome of a linearizability search (linearizable, not linearizable, timeout);
//     Word turns a verdict and a count of violations into PASS, FAIL or INCONCLUSIVE, and Err into
//     a result's error (wrapping ErrViolation or ErrInconclusive): any violation fails, a timeout
//     without one is inconclusive (TestVerdicts). Both checkers export these errors, and
//     ErrInvalidHistory, under the same names.
//   - ReadJSON and WriteJSON read and write a checker's history: unknown fields are refused, and a
//     history that does not decode or that its Validate refuses is an error wrapping
//     ErrInvalidHistory; Invalid makes such an error naming what is wrong (TestReadJSON).
//   - Load is what both workloads' configs bound (clients, watchers, ops, duration, request
//     timeout); Load.Validate refuses a load with no client or a negative count or duration, naming
//     the field, with an error wrapping the workload's ErrInvalidConfig (TestLoadValidate).
//   - PhaseFunc is told each part of a check as it begins (PhaseSearch, PhaseWatches and each
//     checker's own), for a progress line; a nil one is told nothing (the checkers'
//     TestCheckPhases).
//   - Stopped, Polled and Stoppable stop a check when its context ends (both checkers'
//     CheckContext): Stopped is the error wrapping ctx.Err(), Polled looks at ctx every PollEvery
//     steps, Stoppable makes a porcupine model refuse every step, so that porcupine's search, which
//     takes a timeout and no context, backtracks and returns (TestStoppable).
//   - Outcome (ok, conflict, failed, unknown) and NameCount count requests by name and outcome, as
//     both workloads' stats and both histories' Counts do; CountNames counts a history's items by
//     name, leaving out names without any. Count is one line of a coverage, Missing names what a
//     run did not exercise (TestCountNames).
//   - Report is what an HTML report of a checked history shows, whichever checker built it: the
//     word and verdict, the Run, findings, violations (ReportViolation: guarantee, where, message,
//     known-bug label, detail, and Refs to the timeline items it concerns), scenario results,
//     coverage (the lines counting 0 named as not exercised), the timeline's rows (a client's or a
//     watch's) and items (ReportItem: a short label, the full text, the keys the key filter matches),
//     and tables of the checker's own. Limit and Add keep a large history's timeline to the items a
//     violation names; ClientRows adds a row per client. WriteReport writes it as one self-contained
//     page (inline style, script and JSON data, no network): the verdict and violations as HTML,
//     the timeline drawn by the script, only rows with something in view, with zoom, pan, filters
//     by key, client and watch, and violation links that zoom to, highlight and open their items
//     (TestWriteReport: every link names an item, which lists the violation; the data cannot close
//     its script element; TestWriteReportPass, TestReportLimit). interop/report checks the page in
//     chromium.
//
// Like the checkers, package check imports nothing of what they judge (no listwatch store,
// etcdgrpc, watch, cache, httpwatch, chain or storage package): `go list -deps ./check/...` shows
// none. The command that runs the checkers, `listwatch check`, parses flags and prints what they
// return.
package check
