// Command benchtable reads the output of `go test -bench` over interop/sidebyside (the benchmarks that
// run listwatch and the upstream code it mirrors in one process, on one workload) and prints one table:
// per row listwatch's figure, upstream's, how far listwatch is ahead (upstream over listwatch for a
// figure where lower is better, so that above 1x always means ahead), the goal of issue 16, and
// whether it was met. `make bench` runs the benchmarks and pipes them here.
//
//	go run ./internal/benchtable < bench.out
//
// # Invariants
//
//   - Every row of the table is printed, in order, whatever the input: a figure the input lacks is
//     "-" and its status "no data"; a row whose benchmark failed says FAILED, with the figures the
//     failed run logged ("figures (not valid): ...") if any (TestTableMissingAndFailed, TestParse).
//   - A goal is met only when the figures it names are present and satisfy it; a missed goal says by
//     how much (TestGoals).
//   - Lines of the input that are not benchmark results are ignored, except uptime's, which are
//     echoed as the load the figures were taken under (TestParse).
package main
