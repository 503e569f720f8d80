package etcd

import (
	"fmt"
	"testing"
)

// tombstoneHistory is etcd-io/etcd#18089 as a history: a compaction at the revision of a delete,
// then a watch from that revision that gets the put after it but not the DELETE.
func tombstoneHistory() *History {
	b := &builder{}
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("b", "1"), rev(3))
	b.op(0, del("a"), &Response{Revision: 4, DeleteRange: &DeleteRangeResponse{Deleted: 1}})
	b.op(0, Request{Compact: &CompactRequest{Revision: 4}}, rev(4))
	b.op(0, put("c", "1"), rev(5))
	b.h.Watches = []Watch{{Client: 1, Call: 100, Request: WatchRequest{Key: "a", RangeEnd: "z", StartRevision: 4},
		Responses: []WatchResponse{{Time: 101, Revision: 5, Created: true},
			{Time: 102, Revision: 5, Events: []Event{{Type: Put, Kv: kv("c", "1", 5, 5, 1)}}}}}}
	return &b.h
}

// progressAheadHistory is etcd-io/etcd#15220 as a history: a progress notification at 3 before the
// event at 3.
func progressAheadHistory() *History {
	b := &builder{}
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("a", "2"), rev(3))
	b.h.Watches = []Watch{{Client: 1, Call: 100, Request: WatchRequest{Key: "a", StartRevision: 2},
		Responses: []WatchResponse{{Time: 101, Revision: 3, Created: true},
			{Time: 102, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "1", 2, 2, 1)}}},
			{Time: 103, Revision: 3},
			{Time: 104, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "2", 2, 3, 2)}}}}}}
	return &b.h
}

// progressBackwardsHistory is etcd-io/etcd#15220 on a watch with periodic progress notifications
// (periodic says whether it asked for them): a requested notification at 3 sent before a periodic
// one at 2, as a cluster of 3.4.23 did (TestWorkloadsAgainstEtcdCluster/k8s: 140, then 139).
func progressBackwardsHistory(periodic bool) *History {
	b := &builder{}
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("b", "1"), rev(3))
	b.h.Watches = []Watch{{Client: 1, Call: 100, Request: WatchRequest{Key: "a", StartRevision: 2, ProgressNotify: periodic},
		Responses: []WatchResponse{{Time: 101, Revision: 3, Created: true},
			{Time: 102, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "1", 2, 2, 1)}}},
			{Time: 103, Revision: 3},
			{Time: 104, Revision: 2}}}}
	return &b.h
}

// progressAheadCompactedHistory is etcd-io/etcd#15220 ending in a compaction: a progress notification
// at 4 before the events at 2 to 4, then a compaction at 5 cancels the watch, which still needed 2.
// From the notification alone the watch needed 5, which the compaction kept.
func progressAheadCompactedHistory() *History {
	b := &builder{}
	for i := range 4 {
		b.op(0, put("a", fmt.Sprint(i)), rev(int64(i+2)))
	}
	b.op(0, Request{Compact: &CompactRequest{Revision: 5}}, rev(5))
	b.h.Watches = []Watch{{Client: 1, Call: 35, Request: WatchRequest{Key: "a", StartRevision: 2},
		Responses: []WatchResponse{{Time: 36, Revision: 4, Created: true},
			{Time: 37, Revision: 4},
			{Time: 60, Revision: 5, Canceled: true, CompactRevision: 5}}}}
	return &b.h
}

// resentHistory is a watch from 2 that receives the events at 2 and 3, then (below says whether) a
// progress notification at 2, below the event at 3 it had, and then the event at dup again, as a
// clientv3 watch resumed from the notification's revision plus one does (etcd 3.4.23 under faults,
// TestCheckClusterFaults: a notification at 509 after an event at 510, then 510 again).
func resentHistory(below bool, dup int64) *History {
	b := &builder{}
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("a", "2"), rev(3))
	progress := int64(3)
	if below {
		progress = 2
	}
	dupEv := Event{Type: Put, Kv: kv("a", "1", 2, 2, 1)}
	if dup == 3 {
		dupEv = Event{Type: Put, Kv: kv("a", "2", 2, 3, 2)}
	}
	b.h.Watches = []Watch{{Client: 1, Call: 100, Request: WatchRequest{Key: "a", StartRevision: 2},
		Responses: []WatchResponse{{Time: 101, Revision: 3, Created: true},
			{Time: 102, Revision: 2, Events: []Event{{Type: Put, Kv: kv("a", "1", 2, 2, 1)}}},
			{Time: 103, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "2", 2, 3, 2)}}},
			{Time: 104, Revision: progress},
			{Time: 105, Revision: 3, Events: []Event{dupEv}}}}}
	return &b.h
}

// TestClassifyResentAfterProgressBelow: an event received twice is etcd-progress-ahead on 3.4.23
// only when a progress notification below an event already received came before it and the event
// is above that notification; otherwise it is unexplained.
func TestClassifyResentAfterProgressBelow(t *testing.T) {
	cases := []struct {
		name  string
		h     *History
		known bool
	}{
		{"resent above a notification below an event", resentHistory(true, 3), true},
		{"resent without a notification below", resentHistory(false, 3), false},
		{"resent at the notification's revision", resentHistory(true, 2), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustCheck(t, c.h)
			labels := Classify(c.h, res, Target{Product: "etcd", Version: "3.4.23"})
			dups := 0
			for i, v := range res.Violations {
				if v.Signature != SigDuplicate {
					continue
				}
				dups++
				if got := labels[i].Known() && labels[i].Bug.Name == "etcd-progress-ahead"; got != c.known {
					t.Errorf("%v: label %+v, want etcd-progress-ahead %t", v, labels[i], c.known)
				}
			}
			if dups != 1 {
				t.Fatalf("%d duplicates, want 1: %v", dups, res.Err())
			}
		})
	}
}

// TestClassifyProgressAheadThenCompacted: every violation of a watch canceled as compacted after a
// progress notification one below the compaction is etcd-progress-ahead on 3.4.23.
func TestClassifyProgressAheadThenCompacted(t *testing.T) {
	h := progressAheadCompactedHistory()
	res := mustCheck(t, h)
	found := false
	for i, l := range Classify(h, res, Target{Product: "etcd", Version: "3.4.23"}) {
		v := res.Violations[i]
		found = found || v.Signature == SigCompactedNotNeeded
		if l.Bug == nil || l.Bug.Name != "etcd-progress-ahead" {
			t.Errorf("violation %v: label %+v, want etcd-progress-ahead", v, l)
		}
	}
	if !found {
		t.Fatalf("no %s violation: %v", SigCompactedNotNeeded, res.Err())
	}
}

// TestClassify: a violation with a known bug's signature is labelled with it for a version that has
// the bug, is a regression for a version with the fix, and is unexplained for another product.
func TestClassify(t *testing.T) {
	cases := []struct {
		name       string
		h          *History
		target     Target
		bug        string
		regression bool
	}{
		{"tombstone on 3.4.23", tombstoneHistory(), Target{Product: "etcd", Version: "3.4.23"}, "etcd-compacted-tombstone", false},
		{"tombstone on 3.5.15", tombstoneHistory(), Target{Product: "etcd", Version: "3.5.15"}, "etcd-compacted-tombstone", false},
		// fixed in 3.5.16; the same signature after a restart is fixed in 3.5.18
		{"tombstone on 3.5.17", tombstoneHistory(), Target{Product: "etcd", Version: "3.5.17"}, "etcd-tombstone-after-restart", false},
		{"tombstone on 3.5.18", tombstoneHistory(), Target{Product: "etcd", Version: "3.5.18"}, "etcd-compacted-tombstone", true},
		{"tombstone on 3.7.3", tombstoneHistory(), Target{Product: "etcd", Version: "3.7.3"}, "etcd-compacted-tombstone", true},
		{"tombstone on kine", tombstoneHistory(), Target{Product: "kine", Version: "3.5.13"}, "", false},
		{"progress ahead on 3.4.23", progressAheadHistory(), Target{Product: "etcd", Version: "3.4.23"}, "etcd-progress-ahead", false},
		{"progress ahead on 3.5.7", progressAheadHistory(), Target{Product: "etcd", Version: "3.5.7"}, "etcd-progress-ahead", false},
		{"progress ahead on 3.5.12", progressAheadHistory(), Target{Product: "etcd", Version: "3.5.12"}, "etcd-progress-ahead", true},
		{"progress ahead on 3.4.25", progressAheadHistory(), Target{Product: "etcd", Version: "3.4.25"}, "etcd-progress-ahead", true},
		{"progress ahead on 3.5.13", progressAheadHistory(), Target{Product: "etcd", Version: "3.5.13"}, "etcd-progress-ahead", true},
		{"progress ahead on an unknown version", progressAheadHistory(), Target{Product: "etcd", Version: "dev"}, "etcd-progress-ahead", false},
		{"progress ahead on kine", progressAheadHistory(), Target{Product: "kine", Version: "3.5.13"}, "kine-progress-ahead", false},
		{"progress ahead on kine v0.17.0", progressAheadHistory(), Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.17.0"}, "kine-progress-ahead", false},
		{"progress ahead on kine v0.17.5", progressAheadHistory(), Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.17.5"}, "kine-progress-ahead", true},
		{"progress ahead on kine v0.16.4", progressAheadHistory(), Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.16.4"}, "kine-progress-ahead", false},
		{"progress ahead on kine v0.16.5", progressAheadHistory(), Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.16.5"}, "kine-progress-ahead", true},
		{"progress ahead on kine v0.17.1", progressAheadHistory(), Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.17.1"}, "kine-progress-ahead", true},
		{"progress ahead on something else", progressAheadHistory(), Target{}, "", false},
		{"progress backwards on 3.4.23", progressBackwardsHistory(true), Target{Product: "etcd", Version: "3.4.23"}, "etcd-progress-ahead", false},
		{"progress backwards on 3.4.31", progressBackwardsHistory(true), Target{Product: "etcd", Version: "3.4.31"}, "etcd-progress-ahead", true},
		{"progress backwards without periodic notifications", progressBackwardsHistory(false), Target{Product: "etcd", Version: "3.4.23"}, "", false},
		{"progress backwards on kine", progressBackwardsHistory(true), Target{Product: "kine", Version: "3.5.13"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustCheck(t, c.h)
			if len(res.Violations) != 1 {
				t.Fatalf("want one violation: %v", res.Err())
			}
			l := Classify(c.h, res, c.target)[0]
			name := ""
			if l.Bug != nil {
				name = l.Bug.Name
			}
			if name != c.bug || l.Regression != c.regression {
				t.Fatalf("label %q regression %v, want %q regression %v (violation %v)", name, l.Regression, c.bug, c.regression, res.Violations[0])
			}
			tally := TallyLabels(Classify(c.h, res, c.target))
			if known := c.bug != "" && !c.regression; (tally.Known == 1) != known || (tally.Unexplained == 1) == known {
				t.Errorf("tally %+v", tally)
			}
		})
	}
}

// TestClassifyNeedsTheSignature: a missing event that is not a compacted delete is no
// etcd-compacted-tombstone, on any version.
func TestClassifyNeedsTheSignature(t *testing.T) {
	h := tombstoneHistory()
	h.Operations[3].Request.Compact.Revision = 3
	h.Operations[3].Response = rev(4)
	res := mustCheck(t, h)
	if len(res.Violations) != 1 {
		t.Fatalf("want one violation: %v", res.Err())
	}
	if l := Classify(h, res, Target{Product: "etcd", Version: "3.4.23"})[0]; l.Bug != nil {
		t.Fatalf("labelled %s", l.Bug.Name)
	}
}

// TestProgressBugsVersions: the fix of etcd-progress-ahead (3.4.25, 3.5.8) brought
// etcd-progress-unsynced, fixed in 3.4.31 and 3.5.13; no release has both, as the zoo found
// (interop/zoo: 3.4.23 the first, 3.5.12 the second).
func TestProgressBugsVersions(t *testing.T) {
	ahead, unsynced := BugNamed("etcd-progress-ahead"), BugNamed("etcd-progress-unsynced")
	for _, c := range []struct {
		version         string
		ahead, unsynced bool
	}{
		{"3.4.23", true, false}, {"3.4.25", false, true}, {"3.4.30", false, true}, {"3.4.31", false, false},
		{"3.5.0", true, false}, {"3.5.7", true, false}, {"3.5.8", false, true}, {"3.5.12", false, true},
		{"3.5.13", false, false}, {"3.6.0", false, false}, {"3.7.3", false, false},
	} {
		if got := ahead.Affects(c.version); got != c.ahead {
			t.Errorf("etcd-progress-ahead affects %s: %v, want %v", c.version, got, c.ahead)
		}
		if got := unsynced.Affects(c.version); got != c.unsynced {
			t.Errorf("etcd-progress-unsynced affects %s: %v, want %v", c.version, got, c.unsynced)
		}
	}
}

// TestKineBugsReleases: kine's bugs by its own release. v0.16.5, released with v0.17.1, has its
// watch fix (server/watch.go as v0.17.1's); v0.16.5, v0.17.1 and v0.17.2 serve a watch from exactly
// the compaction revision, v0.16.6 and v0.17.3 refuse it again (sqllog's After).
func TestKineBugsReleases(t *testing.T) {
	ahead, compactRev := BugNamed("kine-progress-ahead"), BugNamed("kine-compact-revision-watch")
	for _, c := range []struct {
		release           string
		ahead, compactRev bool
	}{
		{"v0.14.12", true, true}, {"v0.16.4", true, true}, {"v0.16.5", false, false}, {"v0.16.6", false, true},
		{"v0.17.0", true, true}, {"v0.17.1", false, false}, {"v0.17.2", false, false}, {"v0.17.3", false, true},
		{"v0.17.5", false, true}, {"", true, true},
	} {
		target := Target{Product: "kine", Version: "3.6.11", StoreVersion: c.release}
		if got := ahead.AffectsTarget(target); got != c.ahead {
			t.Errorf("kine-progress-ahead affects %q: %v, want %v", c.release, got, c.ahead)
		}
		if got := compactRev.AffectsTarget(target); got != c.compactRev {
			t.Errorf("kine-compact-revision-watch affects %q: %v, want %v", c.release, got, c.compactRev)
		}
	}
}

// TestKnownCrash: kine v0.14.12's panic in CancelEarly is k3s-io/kine#606, of v0.14.11 and
// v0.14.12 only; another panic, or another product's, is no known crash.
func TestKnownCrash(t *testing.T) {
	const died = "kine-v0.14.12 exited: panic: runtime error: invalid memory address or nil pointer dereference in github.com/k3s-io/kine/pkg/server.(*watcher).CancelEarly at github.com/k3s-io/kine@v0.14.12/pkg/server/watch.go:262 +0xcb"
	kine := Target{Product: "kine", StoreVersion: "v0.14.12"}
	c := CrashOf(kine, died)
	if c == nil || c.Trackers[0] != "k3s-io/kine#606" {
		t.Fatalf("CrashOf: %+v, want k3s-io/kine#606", c)
	}
	for release, want := range map[string]bool{"v0.14.10": false, "v0.14.11": true, "v0.14.12": true, "v0.14.13": false, "v0.16.5": false, "": true} {
		if got := c.AffectsTarget(Target{Product: "kine", StoreVersion: release}); got != want {
			t.Errorf("affects %q: %v, want %v", release, got, want)
		}
	}
	if c.AffectsTarget(Target{Product: "etcd", Version: "3.5.13"}) {
		t.Error("affects etcd")
	}
	put := "kine-v0.16.5 exited: panic: runtime error: invalid memory address or nil pointer dereference in github.com/k3s-io/kine/pkg/server.(*LimitedServer).Put at github.com/k3s-io/kine@v0.16.5/pkg/server/put.go:32 +0x201"
	if c := CrashOf(kine, put); c != nil {
		t.Errorf("a panic in Put is %s", c.Name)
	}
	if c := CrashOf(Target{Product: "etcd"}, died); c != nil {
		t.Errorf("etcd's crash is %s", c.Name)
	}
	if ref := c.Reference(); ref != "k3s-io/kine#606 ("+c.Title+"; affects kine v0.14.11, v0.14.12; fixed in v0.14.13)" {
		t.Errorf("Reference: %q", ref)
	}
}

// TestEventAtCreatedRevision: a watch from 0 may receive an event at the revision its created
// response names (etcd 3.7.3 reads that revision after registering the watcher; a write between the
// two is delivered), which is not judged; one below that revision breaks first_revision.
func TestEventAtCreatedRevision(t *testing.T) {
	for _, c := range []struct {
		created int64
		want    int
	}{{created: 2, want: 0}, {created: 3, want: 1}} {
		b := &builder{}
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		b.h.Watches = []Watch{{Client: 1, Call: 100, Request: WatchRequest{Key: "a"},
			Responses: []WatchResponse{{Time: 101, Revision: c.created, Created: true},
				{Time: 102, Revision: 2, Events: []Event{{Type: Put, Kv: kv("a", "1", 2, 2, 1)}}},
				{Time: 103, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "2", 2, 3, 2)}}}}}}
		res := mustCheck(t, &b.h)
		got := 0
		for _, v := range res.Violations {
			if v.Guarantee != FirstRevision {
				t.Errorf("created at %d: %v, want first_revision violations only", c.created, v)
			}
			got++
		}
		if got != c.want {
			t.Errorf("created at %d: %d first_revision violations, want %d: %v", c.created, got, c.want, res.Violations)
		}
	}
}
