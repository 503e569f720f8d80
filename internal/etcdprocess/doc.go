// Package etcdprocess starts real etcd server processes (Binary, /usr/bin/etcd from Debian's
// etcd-server package) for the tests that compare listwatch with etcd itself: one member or a
// cluster of several, each with a fresh data directory on free loopback ports.
//
// # API
//
//   - Launch starts a cluster and returns it once every member is healthy; Cluster.Endpoints are the
//     client endpoints, Cluster.Stop kills the members and removes their data.
//   - Start and StartCluster do the same for a test: they skip it when etcd is not installed, fail
//     it when etcd does not start, and stop the cluster when the test ends.
//
// # Invariants
//
//   - Launch returns only once every member answers /health with "health":"true" (the cluster has a
//     leader), so the first request a test sends is served (TestLaunch, TestLaunchCluster).
//   - A member that exits before it is healthy, as when another process took one of its ports, is
//     retried on other ports a few times; the error after the last attempt quotes etcd's output
//     (TestLaunchFailure).
//   - Without Binary, Launch fails with ErrNotInstalled and StartCluster skips the test
//     (TestLaunchNotInstalled).
//   - Stop, and every failed Launch, kills each process it started, waits for it to exit and removes
//     the data directories: no process, goroutine or directory is left (TestLaunch,
//     TestLaunchFailure, and goleak in TestMain).
package etcdprocess
