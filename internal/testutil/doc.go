// Package testutil holds what the tests of every listwatch package share: condition polling with a
// generous deadline, the common timeouts, a buffer safe for a writer and a reader, a logger that
// discards, and a test that records its failures. It imports nothing else of listwatch, so that any package's tests may use it.
//
// # API
//
//   - WaitTimeout bounds every wait of a test: a minute, or $LISTWATCH_WAIT_TIMEOUT (WaitTimeoutVar),
//     which make stress sets to 5m; PollInterval is how often a condition is polled.
//   - WaitFor polls a condition until it holds and fails the test, naming what it waited for, once
//     WaitTimeout passes. Poll returns that failure as an error instead, for helpers that are not
//     given a test, and calls a step function between polls to move the fake clocks what is awaited
//     needs. Poller does either with another interval or deadline.
//   - SyncBuffer is a bytes.Buffer that a writer goroutine and a reader may share.
//   - DiscardLogger returns a *slog.Logger that drops everything.
//   - CloseAtCleanup stops what a test started at its cleanup and fails the test, naming it, if
//     stopping fails.
//   - CancelAtEachPhase holds a checker to its cancellation contract, phase by phase (the etcd and
//     Kubernetes checkers' TestCheckContextStops).
//   - Recorder (Record) is a test whose failures are recorded, not reported, for tests of a
//     helper's failure path.
//
// # Invariants
//
//   - A wait never fails before its deadline and always fails after it, with a message that names
//     the condition and the deadline (TestPollTimesOut, TestWaitForFailsTheTest).
//   - LISTWATCH_WAIT_TIMEOUT sets WaitTimeout; a value that is not a positive duration stops the test
//     binary with a message naming the variable (TestWaitTimeoutFrom).
//   - CancelAtEachPhase passes a run that stops in the phase it is cancelled in, without a result,
//     naming it, and fails one that goes on, gives a result or names no phase (TestCancelAtEachPhase).
//   - A Recorder's Fatal ends the goroutine Record runs, as testing.T's does; Error and Fatal are
//     recorded, never reported to the wrapped test (TestWaitForFailsTheTest).
//   - Step runs between polls, never before the first one, so that a condition that already holds
//     moves no clock (TestPollSteps).
//   - CloseAtCleanup's stop functions run at the cleanup, last registered first, and only a failing
//     one fails the test (TestCloseAtCleanup).
//   - SyncBuffer keeps every byte written, in order, under concurrent Write and String
//     (TestSyncBuffer, run with -race).
package testutil
