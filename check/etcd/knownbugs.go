package etcd

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Target says what a history was recorded against, for matching its violations with known bugs.
type Target struct {
	// Product is "etcd", "kine", or "" when unknown.
	Product string
	// Version is the version the store reports (kine reports the etcd version it emulates).
	Version string
	// StoreVersion is the store's own release where it reports another product's version (kine's,
	// "v0.17.5"); empty when unknown, and then the store is taken to have every bug of its product.
	StoreVersion string
}

// KnownBug is a public upstream bug that breaks a guarantee Check holds etcd to, with the signature
// its violations have.
type KnownBug struct {
	// Name is a short name; Product the store it is a bug of ("etcd", "kine").
	Name, Product string
	// Title says what goes wrong.
	Title string
	// Trackers are the upstream issues and pull requests ("etcd-io/etcd#15220").
	Trackers []string
	// Affected and FixedIn name the versions, in words; FixedIn is empty while the bug is open.
	Affected, FixedIn string
	// Guarantees and Signatures are what its violations look like.
	Guarantees []Guarantee
	Signatures []string
	// affects reports whether a version has the bug: etcd's version for etcd's bugs, kine's own
	// release for kine's; nil: every version.
	affects func(v *version.Version) bool
	// also is a further condition on the violation; nil: none.
	also func(h *History, v *Violation) bool
}

// Label is the known bug a violation matches, if any.
type Label struct {
	// Bug is nil for an unexplained violation.
	Bug *KnownBug
	// Regression: the violation has the bug's signature but the target's version has the fix; it
	// counts as unexplained.
	Regression bool
}

// Known reports whether the violation is explained by a known bug of the target's version.
func (l Label) Known() bool { return l.Bug != nil && !l.Regression }

var (
	v3_4_25 = version.MustParseSemantic("3.4.25")
	v3_4_31 = version.MustParseSemantic("3.4.31")
	v3_4_36 = version.MustParseSemantic("3.4.36")
	v3_5_0  = version.MustParseSemantic("3.5.0")
	v3_5_8  = version.MustParseSemantic("3.5.8")
	v3_5_13 = version.MustParseSemantic("3.5.13")
	v3_5_16 = version.MustParseSemantic("3.5.16")
	v3_5_18 = version.MustParseSemantic("3.5.18")

	kine0_14_11 = version.MustParseSemantic("0.14.11")
	kine0_14_13 = version.MustParseSemantic("0.14.13")
	kine0_16_5  = version.MustParseSemantic("0.16.5")
	kine0_17_0  = version.MustParseSemantic("0.17.0")
	kine0_17_1  = version.MustParseSemantic("0.17.1")
)

// KnownBugs are the upstream bugs Classify recognises.
var KnownBugs = []*KnownBug{
	{
		Name: "etcd-progress-ahead", Product: "etcd",
		Title:    "a requested progress notification is not synchronised with the watch stream: it can be sent ahead of events still to be sent, below one sent, or before a periodic notification below it",
		Trackers: []string{"etcd-io/etcd#15220", "etcd-io/etcd#15237", "etcd-io/etcd#15695", "etcd-io/etcd#15697", "etcd-io/etcd#15248"},
		// #15237's backports (#15697, #15695) shipped in 3.4.25 and 3.5.8 (etcd's CHANGELOG-3.4 and
		// -3.5); the zoo (interop/zoo) finds it on 3.4.23 and not on 3.5.12. The apiserver trusts
		// RequestProgress only from 3.4.31 and 3.5.13, which also fix etcd-progress-unsynced: Gated.
		Affected: "etcd before 3.4.25, 3.5.0 to 3.5.7", FixedIn: "3.4.25, 3.5.8",
		Guarantees: slices.Concat(progressAheadGuarantees, []Guarantee{Unique}),
		Signatures: slices.Concat(progressAheadSignatures, []string{SigProgressBackwards, SigDuplicate}),
		affects: func(v *version.Version) bool {
			return v.LessThan(v3_4_25) || v.AtLeast(v3_5_0) && v.LessThan(v3_5_8)
		},
		also: progressAhead,
	},
	{
		// no violation of a history shows it (a missing answer is no event): scenarios that wait
		// for the answer name it
		Name: "etcd-progress-unsynced", Product: "etcd",
		Title:    "a RequestProgress is never answered while a watch that started in the past has caught up without receiving an event",
		Trackers: []string{"etcd-io/etcd#17507", "etcd-io/etcd#17557"},
		// the regression of #15237's fix: the releases that have it and not #17557's backports
		// (#17567, #17566)
		Affected: "etcd 3.4.25 to 3.4.30, 3.5.8 to 3.5.12", FixedIn: "3.4.31, 3.5.13",
		affects: func(v *version.Version) bool {
			return v.AtLeast(v3_4_25) && v.LessThan(v3_4_31) || v.AtLeast(v3_5_8) && v.LessThan(v3_5_13)
		},
	},
	{
		Name: "etcd-compacted-tombstone", Product: "etcd",
		Title:    "a compaction at the revision of a delete drops its tombstone: a watch from that revision never gets the DELETE",
		Trackers: []string{"etcd-io/etcd#18089", "etcd-io/etcd#18274", "etcd-io/etcd#18474"},
		// #18274's 3.5 backport (#18474) was merged in August 2024, after 3.5.15: the zoo finds the
		// bug on 3.5.13 and not on 3.5.17. Its 3.4 release is taken as 3.4.36, where
		// etcd-tombstone-after-restart is fixed too.
		Affected: "etcd before 3.4.36, 3.5.0 to 3.5.15", FixedIn: "3.5.16, 3.6.0; 3.4.36 at the latest",
		Guarantees: []Guarantee{Resumable, Reliable}, Signatures: []string{SigMissing},
		affects: func(v *version.Version) bool {
			return v.LessThan(v3_4_36) || v.AtLeast(v3_5_0) && v.LessThan(v3_5_16)
		},
		also: deletesAtCompactions,
	},
	{
		// the same signature, after a restart: Classify prefers the bug the version has
		Name: "etcd-tombstone-after-restart", Product: "etcd",
		Title:    "a tombstone that is a key's only revision left after compactions is not restored into the index on restart: a watch from its revision never gets the DELETE",
		Trackers: []string{"etcd-io/etcd#19179", "etcd-io/etcd#19188", "etcd-io/etcd#19249"},
		Affected: "etcd before 3.4.36, 3.5.0 to 3.5.17", FixedIn: "3.4.36, 3.5.18, 3.6.0",
		Guarantees: []Guarantee{Resumable, Reliable}, Signatures: []string{SigMissing},
		affects: func(v *version.Version) bool {
			return v.LessThan(v3_4_36) || v.AtLeast(v3_5_0) && v.LessThan(v3_5_18)
		},
		also: deletesAtCompactions,
	},
	{
		Name: "kine-progress-ahead", Product: "kine",
		Title: "a progress notification can carry the current revision before the events of that revision reached the watch",
		// #602 (v0.14.12) made a progress wait for the poll loop to have read the revision, not for
		// the watch to have sent its events; #746, the watch pipeline of #731, fixed it. In v0.17.0
		// server/watch.go watcher.ProgressAll checks only the watches with progress_notify, and
		// watcher.watch answers created before listing a watch's history: request-progress-not-ahead's
		// watches from the past are overtaken (the zoo finds it on v0.17.0, not on v0.17.5). v0.16.5,
		// released with v0.17.1, has the same server/watch.go as v0.17.1: the fix, backported.
		Trackers: []string{"k3s-io/kine#731", "k3s-io/kine#746", "k3s-io/kine#602"},
		Affected: "kine before v0.16.5, v0.17.0", FixedIn: "v0.16.5, v0.17.1",
		Guarantees: progressAheadGuarantees, Signatures: progressAheadSignatures,
		affects: func(v *version.Version) bool {
			return v.LessThan(kine0_16_5) || !v.LessThan(kine0_17_0) && v.LessThan(kine0_17_1)
		},
		also: progressAhead,
	},
	{
		Name: "kine-compact-revision-watch", Product: "kine",
		Title: "a watch from exactly the compaction revision is refused as compacted, though etcd serves it",
		// logstructured.Watch lists from the revision before the start; sqllog.SQLLog.After of
		// v0.16.5, v0.17.1 and v0.17.2 refuses only below the compaction revision minus one (the
		// zoo: not found on v0.16.5), v0.16.6 and v0.17.3 went back to refusing below it (checkRevision).
		Trackers:   []string{"k3s-io/kine#747"},
		Affected:   "kine's SQL drivers but v0.16.5, v0.17.1, v0.17.2 (#747 fixed the t4 driver only)",
		FixedIn:    "v0.16.5, v0.17.1 (undone in v0.16.6, v0.17.3)",
		Guarantees: []Guarantee{Compaction}, Signatures: []string{SigCompactedNotNeeded},
		affects: func(v *version.Version) bool {
			return !slices.ContainsFunc(kineServingCompactRevision, v.EqualTo)
		},
		also: compactedAtStart,
	},
}

// kineServingCompactRevision are the kine releases whose SQL drivers serve a watch from exactly the
// compaction revision.
var kineServingCompactRevision = []*version.Version{kine0_16_5, kine0_17_1, version.MustParseSemantic("0.17.2")}

// KnownCrash is a public upstream bug that kills the store, which a history cannot show: the zoo
// (interop/zoo) tells it from the panic the store's process ended with.
type KnownCrash struct {
	// Name, Product, Title, Trackers, Affected and FixedIn are as a KnownBug's.
	Name, Product, Title string
	Trackers             []string
	Affected, FixedIn    string
	// Panic and Frame are what the store's panic line and the function of its first frame hold.
	Panic, Frame string
	// Provoker names the probe or scenario of the check that provokes it.
	Provoker string
	// SkipProbe, if set, is the probe that provokes it as `listwatch check --skip-probe` names it:
	// a run that skips it does not crash the release, and judges its other bugs.
	SkipProbe string
	// affects reports whether a release of the product has the bug; nil: every release.
	affects func(v *version.Version) bool
}

// KnownCrashes are the crashes the zoo recognises.
var KnownCrashes = []*KnownCrash{
	{
		Name: "kine-cancel-early-panic", Product: "kine",
		Title: "a watch refused at its creation (a client-chosen watch ID, a negative start revision) panics kine",
		// v0.14.11 made server/watch.go watcher.CancelEarly answer such watches; its err parameter is
		// overwritten by CurrentRevision's nil error before err.Error() builds the cancel reason.
		// #606 renamed the parameter (v0.14.13, and every 0.15 and later release).
		Trackers: []string{"k3s-io/kine#606"},
		Affected: "kine v0.14.11, v0.14.12", FixedIn: "v0.14.13",
		Panic: "nil pointer dereference", Frame: "(*watcher).CancelEarly",
		Provoker: "the probe of client-chosen watch IDs", SkipProbe: "client-chosen watch IDs",
		affects: func(v *version.Version) bool {
			return !v.LessThan(kine0_14_11) && v.LessThan(kine0_14_13)
		},
	},
}

// Matches reports whether died, how a store's process ended (its panic line and first frame),
// is this crash.
func (c *KnownCrash) Matches(died string) bool {
	return strings.Contains(died, c.Panic) && strings.Contains(died, c.Frame)
}

// AffectsTarget reports whether the target's release has the crash; a release that does not parse
// is taken to have it.
func (c *KnownCrash) AffectsTarget(t Target) bool {
	if t.Product != c.Product {
		return false
	}
	ver, err := version.ParseGeneric(t.StoreVersion)
	return c.affects == nil || err != nil || c.affects(ver)
}

// CrashOf returns the known crash of the target's product that died matches, nil if none.
func CrashOf(t Target, died string) *KnownCrash {
	for _, c := range KnownCrashes {
		if c.Product == t.Product && c.Matches(died) {
			return c
		}
	}
	return nil
}

// A progress notification ahead of events still to be sent shows as an event after it, or, when the
// watch ends before they come (the run closes it, believing it synced, or a compaction cancels it,
// from the revision after the notification), as events missing below it; ahead of a compaction
// answer still to be sent (a watch from a compacted revision, not yet canceled), as a progress
// notification where the answer was owed first (etcd 3.4.23 does it).
var (
	progressAheadGuarantees = []Guarantee{Bookmarkable, Reliable, Resumable, Compaction}
	progressAheadSignatures = []string{SigEventAfterProgress, SigProgressBelowEvent, SigMissing, SigCompactedNotNeeded, SigNotCanceled}
)

func progressAhead(h *History, v *Violation) bool {
	switch v.Signature {
	case SigProgressBackwards:
		return periodicProgress(h, v)
	case SigMissing:
		return missingBelowProgress(h, v)
	case SigCompactedNotNeeded:
		return neededFromProgress(h, v)
	case SigNotCanceled:
		return v.Watch >= 0 && v.Response >= 0 && h.Watches[v.Watch].Responses[v.Response].IsProgressNotify()
	case SigDuplicate:
		return resentAfterProgressBelow(h, v)
	}
	return true
}

// resentAfterProgressBelow: before the duplicate, the watch received a progress notification below an
// event it had already received, and the duplicate is above the notification. clientv3 resumes a
// watch whose stream broke from the last notification's revision plus one (client/v3 watch.go,
// serveSubstream), so a notification below events already sent makes the resumed watch send them
// again; etcd-io/etcd#15248 found the duplicates so.
func resentAfterProgressBelow(h *History, v *Violation) bool {
	if v.Watch < 0 || v.Response < 0 {
		return false
	}
	var last int64
	for _, r := range h.Watches[v.Watch].Responses[:v.Response] {
		if r.IsProgressNotify() && r.Revision < last && r.Revision < v.Revision && v.Revision <= last {
			return true
		}
		for _, ev := range r.Events {
			last = max(last, ev.Kv.ModRevision)
		}
	}
	return false
}

// periodicProgress: the watch asked for periodic progress notifications. etcd before #15237 (v3rpc
// watch.go) queues a requested notification on the stream's control channel with the revision of
// when it was asked for, and a periodic one on the watch's own channel with the revision of when it
// was made; its send loop takes from either, so a periodic notification made before a requested
// one can be sent after it, going back.
func periodicProgress(h *History, v *Violation) bool {
	return v.Watch >= 0 && h.Watches[v.Watch].Request.ProgressNotify
}

// missingBelowProgress: every missing event is at or below a progress notification the watch
// received.
func missingBelowProgress(h *History, v *Violation) bool {
	if v.Watch < 0 || len(v.Events) == 0 {
		return false
	}
	var p int64
	for _, r := range h.Watches[v.Watch].Responses {
		if r.IsProgressNotify() {
			p = max(p, r.Revision)
		}
	}
	for _, ev := range v.Events {
		if ev.Kv.ModRevision > p {
			return false
		}
	}
	return true
}

// neededFromProgress: the revision the compacted watch needed next, by the checker's reckoning, is
// the one after a progress notification above every event it received, and the compaction did not
// remove it (the notification is at or above the compaction's revision minus one).
func neededFromProgress(h *History, v *Violation) bool {
	if v.Watch < 0 || v.Response < 0 {
		return false
	}
	var p, last int64
	for _, r := range h.Watches[v.Watch].Responses[:v.Response] {
		if r.IsProgressNotify() {
			p = max(p, r.Revision)
		}
		for _, ev := range r.Events {
			last = max(last, ev.Kv.ModRevision)
		}
	}
	return p+1 >= v.Revision && p > last
}

// deletesAtCompactions: every missing event is a DELETE at a revision some successful compaction
// of the history was made at, which the watch started at or before.
func deletesAtCompactions(h *History, v *Violation) bool {
	if len(v.Events) == 0 || v.Watch < 0 {
		return false
	}
	compacted := map[int64]bool{}
	for _, o := range h.Operations {
		if o.Request.Compact != nil && o.Response != nil {
			compacted[o.Request.Compact.Revision] = true
		}
	}
	start := h.Watches[v.Watch].Request.StartRevision
	for _, ev := range v.Events {
		rev := ev.Kv.ModRevision
		if ev.Type != Delete || !compacted[rev] || start == 0 || start > rev {
			return false
		}
	}
	return true
}

// compactedAtStart: the watch was canceled as compacted at exactly the revision it started from.
func compactedAtStart(h *History, v *Violation) bool {
	return v.Watch >= 0 && h.Watches[v.Watch].Request.StartRevision == v.Revision
}

// Affects reports whether version v (as a store reports it) has the bug; a version that does not
// parse is taken to have it.
func (b *KnownBug) Affects(v string) bool {
	ver, err := version.ParseGeneric(v)
	return b.affects == nil || err != nil || b.affects(ver)
}

// BugNamed returns the known bug of that name, nil if none.
func BugNamed(name string) *KnownBug {
	for _, b := range KnownBugs {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// AffectsTarget reports whether the target has the bug: by the version it reports for etcd's bugs,
// by its own release (StoreVersion) for kine's, as kine reports the etcd version it emulates.
func (b *KnownBug) AffectsTarget(t Target) bool {
	if b.Product == "kine" {
		return b.Affects(t.StoreVersion)
	}
	return b.Affects(t.Version)
}

// Reference is the bug in one line: its trackers, title and versions.
func (b *KnownBug) Reference() string {
	return referenceLine(b.Trackers, b.Title, b.Affected, b.FixedIn)
}

// Reference is the crash in one line: its trackers, title and versions.
func (c *KnownCrash) Reference() string {
	return referenceLine(c.Trackers, c.Title, c.Affected, c.FixedIn)
}

func referenceLine(trackers []string, title, affected, fixedIn string) string {
	s := strings.Join(trackers, ", ") + " (" + title + "; affects " + affected
	if fixedIn != "" {
		s += "; fixed in " + fixedIn
	} else {
		s += "; open"
	}
	return s + ")"
}

// Matches reports whether v, a violation of h, has the bug's signature: one of its guarantees and
// signatures, and its further condition.
func (b *KnownBug) Matches(h *History, v *Violation) bool { return b.matches(h, v) }

func (b *KnownBug) matches(h *History, v *Violation) bool {
	return slices.Contains(b.Guarantees, v.Guarantee) && slices.Contains(b.Signatures, v.Signature) &&
		(b.also == nil || b.also(h, v))
}

// Classify labels each violation of res (in order) with the known bug of the target's product it
// matches, preferring one the target's version has. A version that does not parse is taken to have
// every bug; a match on a version with the fix alone is a regression.
func Classify(h *History, res *Result, t Target) []Label {
	labels := make([]Label, len(res.Violations))
	for i := range res.Violations {
		v := &res.Violations[i]
		for _, b := range KnownBugs {
			if b.Product != t.Product || !b.matches(h, v) {
				continue
			}
			if b.AffectsTarget(t) {
				labels[i] = Label{Bug: b}
				break
			}
			if labels[i].Bug == nil {
				labels[i] = Label{Bug: b, Regression: true}
			}
		}
	}
	return labels
}

// Tally counts labelled violations: the distinct known bugs (in KnownBugs order), the violations
// they explain, and the unexplained ones.
type Tally struct {
	Bugs        []*KnownBug
	Known       int
	Unexplained int
}

// TallyLabels counts labels.
func TallyLabels(labels []Label) Tally {
	var t Tally
	seen := map[*KnownBug]bool{}
	for _, l := range labels {
		if !l.Known() {
			t.Unexplained++
			continue
		}
		t.Known++
		seen[l.Bug] = true
	}
	for _, b := range KnownBugs {
		if seen[b] {
			t.Bugs = append(t.Bugs, b)
		}
	}
	return t
}
