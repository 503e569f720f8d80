package history

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
)

// Target says what a history was recorded against, for matching its violations with known bugs.
type Target struct {
	// Product is "etcd", "kine", or "" when unknown.
	Product string
	// Version is the version the store reports (kine reports the etcd version it emulates).
	Version string
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
	// affects reports whether a version has the bug; nil: every version.
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
	v3_4_31 = version.MustParseSemantic("3.4.31")
	v3_4_36 = version.MustParseSemantic("3.4.36")
	v3_5_0  = version.MustParseSemantic("3.5.0")
	v3_5_13 = version.MustParseSemantic("3.5.13")
	v3_5_18 = version.MustParseSemantic("3.5.18")
)

// KnownBugs are the upstream bugs Classify recognises.
var KnownBugs = []*KnownBug{
	{
		Name: "etcd-progress-ahead", Product: "etcd",
		Title:    "a requested progress notification is not synchronised with the watch stream: it can be sent ahead of events still to be sent, or below one sent",
		Trackers: []string{"etcd-io/etcd#15220", "etcd-io/etcd#17507", "etcd-io/etcd#15237", "etcd-io/etcd#17557"},
		Affected: "etcd before 3.4.31, 3.5.0 to 3.5.12", FixedIn: "3.4.31, 3.5.13",
		Guarantees: []Guarantee{Bookmarkable}, Signatures: []string{SigEventAfterProgress, SigProgressBelowEvent},
		// k8s.io/apiserver pkg/storage/feature/feature_support_checker.go endpointSupportsRequestWatchProgress
		affects: func(v *version.Version) bool {
			return v.LessThan(v3_4_31) || v.AtLeast(v3_5_0) && v.LessThan(v3_5_13)
		},
	},
	{
		Name: "etcd-compacted-tombstone", Product: "etcd",
		Title:    "a compaction at the revision of a delete drops its tombstone: a watch from that revision never gets the DELETE",
		Trackers: []string{"etcd-io/etcd#18089", "etcd-io/etcd#19179", "etcd-io/etcd#18274"},
		Affected: "etcd before 3.4.36, 3.5.0 to 3.5.17", FixedIn: "3.4.36, 3.5.18, 3.6.0",
		Guarantees: []Guarantee{Resumable, Reliable}, Signatures: []string{SigMissing},
		affects: func(v *version.Version) bool {
			return v.LessThan(v3_4_36) || v.AtLeast(v3_5_0) && v.LessThan(v3_5_18)
		},
		also: deletesAtCompactions,
	},
	{
		Name: "kine-progress-ahead", Product: "kine",
		Title:      "a progress notification can carry the current revision before the events of that revision reached the watch",
		Trackers:   []string{"k3s-io/kine#731"},
		Affected:   "kine (open)",
		Guarantees: []Guarantee{Bookmarkable}, Signatures: []string{SigEventAfterProgress, SigProgressBelowEvent},
	},
	{
		Name: "kine-compact-revision-watch", Product: "kine",
		Title:      "a watch from exactly the compaction revision is refused as compacted, though etcd serves it",
		Trackers:   []string{"k3s-io/kine#747"},
		Affected:   "kine's SQL drivers (#747 fixed the t4 driver only)",
		Guarantees: []Guarantee{Compaction}, Signatures: []string{SigCompactedNotNeeded},
		also: compactedAtStart,
	},
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

func (b *KnownBug) matches(h *History, v *Violation) bool {
	return slices.Contains(b.Guarantees, v.Guarantee) && slices.Contains(b.Signatures, v.Signature) &&
		(b.also == nil || b.also(h, v))
}

// Classify labels each violation of res (in order) with the known bug of the target's product it
// matches. A version that does not parse is taken to have every bug; a version with the fix makes
// the match a regression.
func Classify(h *History, res *Result, t Target) []Label {
	ver, verErr := version.ParseGeneric(t.Version)
	labels := make([]Label, len(res.Violations))
	for i := range res.Violations {
		v := &res.Violations[i]
		for _, b := range KnownBugs {
			if b.Product != t.Product || !b.matches(h, v) {
				continue
			}
			labels[i] = Label{Bug: b, Regression: b.affects != nil && verErr == nil && !b.affects(ver)}
			break
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
