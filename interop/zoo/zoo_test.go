package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/check/etcd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func readStdout(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".stdout")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseOutput: the output of a check of etcd 3.5.12 (testdata) gives its product, version,
// verdict and the catalogued bugs it named; the failed scenarios explained by them are no details.
func TestParseOutput(t *testing.T) {
	o := parseOutput("etcd v3.5.12", readStdout(t, "etcd-v3.5.12"))
	if o.Product != "etcd" || o.Version != "3.5.12" || o.Verdict != "FAIL: 2 known upstream bugs, 0 unexplained" {
		t.Errorf("product %q, version %q, verdict %q", o.Product, o.Version, o.Verdict)
	}
	if len(o.Found) != 2 || !o.Found["etcd-compacted-tombstone"] || !o.Found["etcd-progress-unsynced"] {
		t.Errorf("found %v, want etcd-compacted-tombstone and etcd-progress-unsynced", o.Found)
	}
	if o.Unexplained != 0 || o.Deviations != 0 || len(o.Details) != 0 {
		t.Errorf("unexplained %d, deviations %d, details %q: want none", o.Unexplained, o.Deviations, o.Details)
	}
}

// TestParseOutputUnexplained: an unexplained violation, one with the signature of a bug the
// version has fixed, and a difference from etcd's API are counted and listed.
func TestParseOutputUnexplained(t *testing.T) {
	out := strings.Join([]string{
		"capabilities (store: kine, reports etcd 3.6.11; differences from etcd marked):",
		"[unexplained] linearizable: a read at 5 saw 3",
		"[unexplained: the signature of etcd-io/etcd#18089, fixed in 3.6.0] resumable: 1 events missing",
		"findings:",
		"  compaction DIFFERS: answers success and keeps the revisions",
		"  scenario filters FAIL (filter): an event the filter excludes",
		"FAIL: 0 known upstream bugs, 2 unexplained; 1 difference from etcd's API",
	}, "\n")
	o := parseOutput("kine", out)
	if o.Unexplained != 2 || o.Deviations != 1 || !o.Fixed["etcd-compacted-tombstone"] || len(o.Found) != 0 {
		t.Errorf("unexplained %d, deviations %d, fixed %v, found %v", o.Unexplained, o.Deviations, o.Fixed, o.Found)
	}
	if len(o.Details) != 3 || !strings.HasPrefix(o.Details[2], "compaction DIFFERS") {
		t.Errorf("details %q: want the two violations and the difference", o.Details)
	}
	if o := parseOutput("x", "no verdict here"); !strings.HasPrefix(o.Verdict, "ERROR") {
		t.Errorf("an output without a verdict: %q, want ERROR", o.Verdict)
	}
}

// TestCell: what the table says of each bug depends on the product, the version's fix and what
// was found.
func TestCell(t *testing.T) {
	tomb := etcd.BugNamed("etcd-compacted-tombstone")
	for _, tc := range []struct {
		o    outcome
		want string
	}{
		{outcome{Product: "etcd", Version: "3.5.13", Found: map[string]bool{tomb.Name: true}}, "found"},
		{outcome{Product: "etcd", Version: "3.5.13"}, "**not found**"},
		{outcome{Product: "etcd", Version: "3.5.18"}, "fixed, not seen"},
		{outcome{Product: "etcd", Version: "3.5.18", Found: map[string]bool{tomb.Name: true}}, "**found, though fixed**"},
		{outcome{Product: "etcd", Version: "3.5.18", Fixed: map[string]bool{tomb.Name: true}}, "**seen, though fixed**"},
		{outcome{Product: "kine", Version: "3.5.17"}, "·"},
		{outcome{Target: "etcd v3.6.0", Verdict: "SKIP: no binary"}, "?"},
	} {
		if got := cell(tc.o, tomb); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
	// kine reports the etcd version it emulates: a kine bug is judged by the release in the name
	// (v0.16.5 has the fix of kine-progress-ahead, and serves a watch from the compaction revision).
	ahead := etcd.BugNamed("kine-progress-ahead")
	for _, tc := range []struct {
		o    outcome
		want string
	}{
		{outcome{Target: "kine v0.17.0 / SQLite", Product: "kine", Version: "3.6.11"}, "**not found**"},
		{outcome{Target: "kine v0.17.0 / SQLite", Product: "kine", Version: "3.6.11", Found: map[string]bool{ahead.Name: true}}, "found"},
		{outcome{Target: "kine v0.17.5 / PostgreSQL ×2", Product: "kine", Version: "3.6.11"}, "fixed, not seen"},
		{outcome{Target: "kine v0.17.5 / SQLite", Product: "kine", Version: "3.6.11", Found: map[string]bool{ahead.Name: true}}, "**found, though fixed**"},
		{outcome{Target: "kine v0.16.5 / SQLite", Product: "kine", Version: "3.6.11"}, "fixed, not seen"},
		{outcome{Target: "etcd v3.5.12", Product: "etcd", Version: "3.5.12"}, "·"},
	} {
		if got := cell(tc.o, ahead); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
	compactRev := etcd.BugNamed("kine-compact-revision-watch")
	for target, want := range map[string]string{"kine v0.16.5 / SQLite": "fixed, not seen", "kine v0.17.5 / SQLite": "**not found**"} {
		if got := cell(outcome{Target: target, Product: "kine", Version: "3.6.11"}, compactRev); got != want {
			t.Errorf("kine-compact-revision-watch on %s: %q, want %q", target, got, want)
		}
	}
}

// v0.14.12's panic (kine's log) as the driver reports it, and a panic no catalogued bug explains.
const (
	died14  = "kine-v0.14.12 exited: panic: runtime error: invalid memory address or nil pointer dereference in github.com/k3s-io/kine/pkg/server.(*watcher).CancelEarly at github.com/k3s-io/kine@v0.14.12/pkg/server/watch.go:262 +0xcb"
	diedPut = "kine-v0.16.5 exited: panic: runtime error: invalid memory address or nil pointer dereference in github.com/k3s-io/kine/pkg/server.(*LimitedServer).Put at github.com/k3s-io/kine@v0.16.5/pkg/server/put.go:32 +0x201"
)

// TestOutcomeOfCrash: a crash that is the catalogued one of the target's release is found and not
// counted unexplained; on a release with the fix, or another panic, it is unexplained. The
// bugs' cells of a crashed target are not judged.
func TestOutcomeOfCrash(t *testing.T) {
	cancelEarly := etcd.KnownCrashes[0]
	ahead := etcd.BugNamed("kine-progress-ahead")
	for _, tc := range []struct {
		name, died       string
		unexplained      int
		crashCell, label string
	}{
		{"kine v0.14.12 / SQLite", died14, 0, "found", "known upstream bug: k3s-io/kine#606 ("},
		{"kine v0.16.5 / SQLite", died14, 1, "**seen, though fixed**", "[unexplained: the signature of k3s-io/kine#606, fixed in v0.14.13] "},
		{"kine v0.16.5 / PostgreSQL ×2", diedPut, 1, "?", "kine-v0.16.5 exited: "},
	} {
		o := outcomeOf(tc.name, "FAIL: 0 known upstream bugs, 0 unexplained", tc.died)
		if !strings.HasPrefix(o.Verdict, "CRASH: ") || o.Unexplained != tc.unexplained || !strings.HasPrefix(o.Details[0], tc.label) {
			t.Errorf("%s: verdict %q, unexplained %d, details %q", tc.name, o.Verdict, o.Unexplained, o.Details)
		}
		if got := crashCell(o, cancelEarly); got != tc.crashCell {
			t.Errorf("%s: crash cell %q, want %q", tc.name, got, tc.crashCell)
		}
		if got := cell(o, ahead); got != "?" {
			t.Errorf("%s: kine-progress-ahead %q, want ?", tc.name, got)
		}
	}
	for _, tc := range []struct {
		o    outcome
		want string
	}{
		{parseOutput("kine v0.17.5 / SQLite", "FAIL: 0 known upstream bugs, 3 unexplained"), "fixed, not seen"},
		{parseOutput("kine v0.14.12 / SQLite", "FAIL: 0 known upstream bugs, 3 unexplained"), "**not found**"},
		{failedOutcome("kine v0.14.12 / PostgreSQL", errors.Join(errSkipped, errors.New("no PostgreSQL"))), "?"},
		{parseOutput("etcd v3.5.12", readStdout(t, "etcd-v3.5.12")), "·"},
	} {
		if got := crashCell(tc.o, cancelEarly); got != tc.want {
			t.Errorf("%s (%s): %q, want %q", tc.o.Target, tc.o.Verdict, got, tc.want)
		}
	}
}

// TestSkipProbeTargets: a kine release with a catalogued crash a probe provokes runs each store
// twice, the second with that probe skipped (--skip-probe), where the crash's cell says so and
// the release's bugs are judged; a release without such a crash runs once.
func TestSkipProbeTargets(t *testing.T) {
	var names []string
	var skip []string
	for _, tg := range targets(nil, []string{"v0.14.12", "v0.17.5"}) {
		names = append(names, tg.Name)
		skip = append(skip, tg.skip...)
	}
	want := []string{"etcd 3.4.23 (Debian)", "kine v0.14.12 / SQLite", "kine v0.14.12 / SQLite, client-chosen watch IDs skipped",
		"kine v0.14.12 / PostgreSQL", "kine v0.14.12 / PostgreSQL, client-chosen watch IDs skipped",
		"kine v0.14.12 / PostgreSQL ×2", "kine v0.14.12 / PostgreSQL ×2, client-chosen watch IDs skipped",
		"kine v0.17.5 / SQLite", "kine v0.17.5 / PostgreSQL", "kine v0.17.5 / PostgreSQL ×2"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") || len(skip) != 3 || skip[0] != "client-chosen watch IDs" {
		t.Errorf("targets %q, skips %q", names, skip)
	}
	out := strings.Join([]string{
		"capabilities (store: kine, reports etcd 3.5.13; differences from etcd marked):",
		"  client-chosen watch IDs             skipped  left out by the run",
		"FAIL: 2 known upstream bugs, 0 unexplained",
	}, "\n")
	o := parseOutput(want[2], out)
	if got := crashCell(o, etcd.KnownCrashes[0]); got != "probe skipped" {
		t.Errorf("crash cell %q, want probe skipped", got)
	}
	if got := cell(o, etcd.BugNamed("kine-progress-ahead")); got != "**not found**" {
		t.Errorf("kine-progress-ahead %q: judged on the run without the crash", got)
	}
	// without the skip the crash is not provoked only if the store lives: a bold not found
	o = parseOutput(want[1], strings.Replace(out, "skipped  left out by the run", "as etcd", 1))
	if got := crashCell(o, etcd.KnownCrashes[0]); got != "**not found**" {
		t.Errorf("crash cell without the skip %q", got)
	}
}

// TestTable: one row a target with a column a catalogued bug; a skipped target says why below.
func TestTable(t *testing.T) {
	out := table([]outcome{parseOutput("etcd v3.5.12", readStdout(t, "etcd-v3.5.12")),
		failedOutcome("kine v0.17.5 / PostgreSQL", errors.Join(errSkipped, errors.New("no PostgreSQL")))}, "run")
	lines := strings.Split(out, "\n")
	if want := 3 + len(etcd.KnownBugs) + len(etcd.KnownCrashes) + 2; strings.Count(lines[0], "|")-1 != want {
		t.Errorf("header %q: want %d columns", lines[0], want)
	}
	if !strings.HasPrefix(lines[2], "| etcd v3.5.12 | 3.5.12 | FAIL |") || !strings.HasPrefix(lines[3], "| kine v0.17.5 / PostgreSQL | – | SKIP |") {
		t.Errorf("rows:\n%s", out)
	}
	if !strings.Contains(out, "kine v0.17.5 / PostgreSQL: SKIP") {
		t.Errorf("the skipped target is not explained:\n%s", out)
	}
}

// TestSplice: the table replaces what lies between the markers, and a README without them is an
// error naming them.
func TestSplice(t *testing.T) {
	readme := "# x\n" + beginMarker + "\nold\n" + endMarker + "\nrest\n"
	got, err := splice(readme, "new\n")
	if err != nil || got != "# x\n"+beginMarker+"\nnew\n"+endMarker+"\nrest\n" {
		t.Errorf("splice: %q, %v", got, err)
	}
	if _, err := splice("# x\n", "new\n"); !errors.Is(err, errNoMarkers) || !strings.Contains(err.Error(), beginMarker) {
		t.Errorf("without markers: %v", err)
	}
}

// TestProcessDied: a store process that panicked is reported by its panic line and the frame
// below it, function and file; a running one is not.
func TestProcessDied(t *testing.T) {
	p, err := startProcess(context.Background(), "/bin/sh", t.TempDir(), "-c",
		`echo "panic: boom"; echo; echo "goroutine 7 [running]:"; echo "foo.(*w).Cancel(0xc0, {0x1, 0x2})"; printf '\t/go/pkg/mod/foo@v1/watch.go:262 +0xcb\n'; exit 2`)
	if err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if got, want := p.died(), "sh exited: panic: boom in foo.(*w).Cancel at foo@v1/watch.go:262 +0xcb"; got != want {
		t.Errorf("died: %q, want %q", got, want)
	}
	running, err := startProcess(context.Background(), "/bin/sh", t.TempDir(), "-c", "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if d := running.died(); d != "" {
		t.Errorf("a running process died: %q", d)
	}
	if err := running.kill(); err != nil {
		t.Fatal(err)
	}
}
