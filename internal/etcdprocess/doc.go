// Package etcdprocess starts real etcd server processes (Binary, /usr/bin/etcd from Debian's
// etcd-server package) for the tests that compare listwatch with etcd itself: one member or a
// cluster of several, each with a fresh data directory on free loopback ports.
//
// # API
//
//   - Launch starts a cluster and returns it once every member is healthy; Cluster.Endpoints are the
//     client endpoints, Cluster.Stop kills the members and removes their data.
//   - LaunchBinary is Launch with another etcd executable (one built from another release).
//   - Cluster.Kill and Cluster.Restart crash a member (SIGKILL) and start it again on its data and
//     ports; Cluster.Pause and Cluster.Resume stop and continue it (SIGSTOP, SIGCONT): the faults
//     `listwatch check --cluster --faults` injects.
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
//   - A restarted member serves what it held before the kill; a paused one answers nothing until
//     resumed (TestFaults): Pause returns once every thread of it has stopped, not when the signal
//     is sent (TestWaitStopped). Restarting a running member, killing or pausing one not running, one out
//     of range, or any member once the cluster is stopped is an error, and so is a restart whose
//     member does not come back, quoting etcd's output (TestFaultsRefused).
//   - Stop, and every failed Launch, kills each process it started, waits for it to exit and removes
//     the data directories: no process, goroutine or directory is left (TestLaunch,
//     TestLaunchFailure, and goleak in TestMain).
package etcdprocess
