// Package runplan holds how listwatch's two seeded workloads (package workload's against an etcd
// store, package check/kube's against a Kubernetes API) lay out a run: every client, watcher or
// compactor draws from a generator of its own, seeded by the run's seed, its role and its index,
// and the run's request bound is split among the clients. It imports nothing of listwatch, so that
// check/kube, which checks the Kubernetes API independently of the etcd side, can share it.
//
// # API
//
//   - Rand(seed, role, index) returns the generator of one (role, index) of a run.
//   - Share(ops, clients, i) returns how many requests client i of clients sends of a bound of
//     ops; -1 (no bound) when ops is 0.
//
// # Invariants
//
//   - A (seed, role, index) always draws the same stream, and another role or index draws
//     another (TestRandStreams).
//   - The shares of a bound add up to it and differ by at most one, the first clients taking the
//     remainder; no bound gives every client -1 (TestShare).
package runplan
