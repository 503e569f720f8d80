// Package benchwatch is the load of listwatch's HTTP watch benchmarks, shared by httpwatch's
// BenchmarkWatchFanout and the side-by-side benchmark of interop/sidebyside, which runs the same
// load against listwatch's API and a real Kubernetes API server.
//
// # API
//
//   - Open starts one watch on a raw loopback connection; Stream.ReadAll reads it frame by frame as
//     the least any client must (undo the chunking, split on newlines, read two fields) and checks
//     it.
//   - Fanout opens Watchers watches, makes Writes writes through the caller's Write at Rate per
//     second (in bursts of Burst) while the watches read, and measures delivered events per second,
//     write-to-receipt latency, the process's CPU time and allocations per delivered event, events
//     per HTTP chunk and bytes per event. Result.Metrics names the figures for b.ReportMetric.
//   - Floor is the loopback floor: the same fan-out with bare goroutines writing prepared frames of a
//     given size (a Fanout run's bytes per event, to move the same bytes) to loopback connections, no
//     HTTP, no cache, no encoding: the least a watch server in this process can spend per event.
//
// # Invariants
//
//   - A stream passes only if it delivers every write, in order, and nothing else: frame k is a
//     MODIFIED event whose object carries "seq":"k" and a resourceVersion above the previous frame's
//     (TestFanoutCountsEveryEvent); a missing, reordered or foreign frame, or a stream that ends
//     early, fails that watcher with the reason (TestFanoutReportsBrokenStreams).
//   - Fanout returns only after every reader goroutine it started has returned, and closes every
//     connection it opened (the package's TestMain checks for leaks).
//   - Floor delivers every frame, of the size asked, to every connection or fails; it refuses a size
//     below its frame's skeleton (TestFloor). Fanout counts every frame's bytes
//     (TestFanoutCountsEveryEvent).
package benchwatch
