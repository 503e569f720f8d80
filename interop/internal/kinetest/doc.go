// Package kinetest starts kine (github.com/k3s-io/kine, the etcd shim k3s runs) in process, over
// SQLite, for the tests that check it with listwatch.
//
// It assembles what kine's pkg/endpoint Listen does for a SQLite endpoint, with kine's own command
// line defaults (datastore poll interval 1 s, progress notifications every 5 s, etcd 3.6.11
// emulated, no automatic compaction, so that a Compact request compacts; Options names the one a
// test may change), on a 127.0.0.1 port the
// kernel picks, in a directory the caller owns. Start returns once the endpoint serves; the stop
// function it returns stops the gRPC server, then kine's backend, and returns when the goroutines
// kine counts have exited (GoleakOptions lists the one it does not: its TTL loop, which ends with
// the backend's context a moment later).
//
// # Invariants
//
//   - Start returns an endpoint that serves a clientv3 put and get, and stop leaves no goroutine
//     but the one GoleakOptions names (TestStartServesAndStops, goleak in TestMain).
//   - A database that cannot be opened is an error of Start, with nothing left running; kine
//     retries opening it for minutes first, so no test waits for that.
package kinetest
