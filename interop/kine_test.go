package interop

import (
	"regexp"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/kinetest"
)

// TestCheckCommandAgainstKine runs `listwatch check --endpoints` against kine v0.17.5 over SQLite, in
// process, with kine's own defaults: kine's Status has no revision and kine writes keys
// of its own at startup, and the check runs all the same, to completion, and fails, naming the
// operations kine refuses, the prev_kv it sends unasked, the events a watch from a compacted
// revision gets instead of the compaction error, and the RequestProgress it leaves unanswered.
func TestCheckCommandAgainstKine(t *testing.T) {
	bin := buildListwatch(t)
	ep, stop, err := kinetest.Start(t.TempDir(), kinetest.Options{CompactMinRetain: kinetest.DefaultCompactMinRetain})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stop kine", stop)
	code, stdout, stderr := runListwatch(t, bin, "check", "--endpoints", ep, "--seed", "11", "--ops", checkOps(), "--compact-every", "200")
	if code != 1 || !regexp.MustCompile(`\nFAIL: \d+ known upstream bugs?, [1-9]\d* unexplained; \d+ differences from etcd's API\n`).MatchString(stdout) {
		t.Fatalf("exit status %d, want 1 and FAIL\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`capabilities \(store: kine, reports etcd 3\.6\.11`),
		regexp.MustCompile(`\n  delete +REFUSED +delete is not implemented by kine\n`),
		regexp.MustCompile(`\n  txn \(any compares and branches\) +REFUSED +etcdserver: unsupported operations in txn request\n`),
		regexp.MustCompile(`\n  RequestProgress +REFUSED +not answered within`),
		regexp.MustCompile(`\n  watch filters +DIFFERS +a watch with the NOPUT filter got a PUT`),
		regexp.MustCompile(`Status of 127\.0\.0\.1:\d+: header revision 0`),
		regexp.MustCompile(`note: the store holds 2 keys at revision \d+ before the run`),
		regexp.MustCompile(`scenario prev-kv-only-when-asked FAIL \(prev_kv\): event of .* has a prev_kv the watch did not ask for`),
		regexp.MustCompile(`scenario compacted-watch-canceled-first FAIL \(compaction\): watch from \d+ received events, though the compaction at \d+ completed before it was created`),
		regexp.MustCompile(`scenario request-progress-answered FAIL \(bookmarkable\): RequestProgress not answered`),
		regexp.MustCompile(`recorded \d+ requests and \d+ watches in .* \(\d+ requests/s\), from revision \d+ to \d+\n`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("the output lacks %s", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if strings.Contains(stdout, "ERROR ") && !strings.Contains(stdout, "unsupported operations in txn request") {
		t.Errorf("a scenario could not run for another reason than a refused txn:\n%s", stdout)
	}
}
