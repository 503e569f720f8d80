// Package report holds the browser test of the HTML report `listwatch check` writes on a failure
// (check.WriteReport, through etcd.WriteReport): the report of a real failing run, recorded against
// Debian's etcd 3.4.23 (testdata/etcd-3.4.23-seed5.json.gz: `listwatch check --workload etcd --ops
// 400 --seed 5 --compact-every 50`, a reliable violation of etcd-io/etcd#15220; the run's scenario
// results beside it), opened in a real browser (Debian's chromium, driven by chromedp). The package
// has no API: everything is in its tests.
//
// TestReportInBrowser checks what a person debugging the run relies on:
//
//   - the page loads from file:// with no network and no JavaScript error (exceptions and console
//     errors are collected);
//   - the verdict (FAIL), the target's version and the first violation, with its known-bug label,
//     are visible without scrolling;
//   - the first violation's first link scrolls the timeline to the watch response it concerns:
//     that element is in the viewport, highlighted, and the detail panel shows its full text;
//   - its "show on the timeline" button draws every item it links to (the writes that made the
//     events the watch missed), highlighted;
//   - the key filter hides the rows without that key: fewer rows are drawn, and every item drawn
//     names the key; zooming in narrows the time window shown.
//
// With LISTWATCH_REPORT_SCREENSHOTS set to a directory, the test saves a screenshot of each step
// there. Without /usr/bin/chromium the test skips, saying so (.ci/run installs it).
package report
