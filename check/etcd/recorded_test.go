package etcd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordedHistories reads the valid histories of testdata/recorded: recorded by workload's
// TestRecordedHistories (-update-recorded) from the workloads and some scenarios run against
// listwatch's store and Debian's etcd, and by interop's TestRecordEmbeddedEtcdHistories against
// embedded etcd.
func recordedHistories(t *testing.T) map[string]*History {
	paths, err := filepath.Glob("testdata/recorded/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no recorded histories in testdata/recorded")
	}
	out := map[string]*History{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ReadJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = h
	}
	return out
}

// TestMutationsAtEveryPosition: each recorded history passes, and every mutation, applied at the
// first and the last place of each kind of position (first event, around a compaction, after a
// progress notification, at the end) of each recorded history, is reported under its guarantee
// and no other but those it may break besides. Every kind of position a mutation does not exclude,
// with a reason, must be found in some recorded history.
func TestMutationsAtEveryPosition(t *testing.T) {
	hs := recordedHistories(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range hs {
			if !yield(n) {
				return
			}
		}
	})
	exercised := map[string]map[posKind]int{}
	for _, name := range names {
		h := hs[name]
		res := mustCheck(t, h)
		if !res.OK() {
			t.Errorf("%s: a recorded history fails: %v", name, res.Err())
			continue
		}
		for i := range mutations {
			m := &mutations[i]
			if exercised[m.name] == nil {
				exercised[m.name] = map[posKind]int{}
			}
			sites := m.sites(h, res)
			for _, k := range posKinds {
				if m.excluded[k] != "" {
					continue
				}
				var at []int
				for j := range sites {
					if slices.Contains(kindsOf(h, sites, j), k) {
						at = append(at, j)
					}
				}
				if len(at) == 0 {
					continue
				}
				for _, j := range slices.Compact([]int{at[0], at[len(at)-1]}) {
					exercised[m.name][k]++
					mh := cloneHistory(t, h)
					m.at(mh, res, sites[j])
					mres := mustCheck(t, mh)
					if err := m.judge(mres.Guarantees()); err != nil {
						t.Errorf("%s: %q at %s place %d: %v\n%v", name, m.name, k, j, err, mres.Err())
					}
				}
			}
		}
	}
	for _, m := range mutations {
		for _, k := range posKinds {
			if m.excluded[k] == "" && exercised[m.name][k] == 0 {
				t.Errorf("%q at a %s position: no recorded history has one, and it is not excluded", m.name, k)
			}
		}
	}
}
