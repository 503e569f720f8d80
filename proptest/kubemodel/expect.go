package kubemodel

import (
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrRequest is the error of a request the model cannot read (a resourceVersion that is not a
// revision).
var ErrRequest = errors.New("kubemodel: bad watch request")

// Request is a watch request as the storage.Interface receives it.
type Request struct {
	// ResourceVersion is as sent: "" (unset), "0", or a revision.
	ResourceVersion     string
	SendInitialEvents   *bool
	AllowWatchBookmarks bool
}

// WithWatchListDefaults is the request as the apiserver hands it to the storage once it defaulted
// it: a watch from "" or "0" that does not say whether it wants initial events gets them.
//
// Mirrors k8s.io/apimachinery pkg/apis/meta/internalversion/defaults.go SetListOptionsDefaults.
func (r Request) WithWatchListDefaults() Request {
	if r.SendInitialEvents == nil && (r.ResourceVersion == "" || r.ResourceVersion == "0") {
		t := true
		r.SendInitialEvents = &t
	}
	return r
}

// Replays says the watch starts with the state at its snapshot as ADDED events: asked for, or the
// legacy watch from "" or "0" that does not say.
//
// Mirrors pkg/storage/etcd3/watcher.go areInitialEventsRequired (the cacher decides alike).
func (r Request) Replays() bool {
	if r.SendInitialEvents == nil {
		return r.ResourceVersion == "" || r.ResourceVersion == "0"
	}
	return *r.SendInitialEvents
}

// EndBookmark says the initial events end with a BOOKMARK annotated k8s.io/initial-events-end.
//
// Mirrors pkg/storage/etcd3/watcher.go isInitialEventsEndBookmarkRequired.
func (r Request) EndBookmark() bool {
	return r.SendInitialEvents != nil && *r.SendInitialEvents && r.AllowWatchBookmarks
}

// revision is the resourceVersion as a revision: 0 for "" and "0".
func (r Request) revision() (int64, error) {
	if r.ResourceVersion == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(r.ResourceVersion, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: resourceVersion %q", ErrRequest, r.ResourceVersion)
	}
	return n, nil
}

func (r Request) String() string {
	sie := "unset"
	if r.SendInitialEvents != nil {
		sie = strconv.FormatBool(*r.SendInitialEvents)
	}
	rv := strconv.Quote(r.ResourceVersion)
	if r.ResourceVersion == "" {
		rv = "unset"
	}
	return fmt.Sprintf("rv=%s sendInitialEvents=%s allowWatchBookmarks=%t", rv, sie, r.AllowWatchBookmarks)
}

// Refusal is an ERROR a watch delivers: its Status's code, reason and message (or the start of the
// message, when it names something the model does not know, such as the cache's revision).
type Refusal struct {
	Code    int32
	Reason  metav1.StatusReason
	Message string
	Prefix  bool
}

// Matches reports whether st is this ERROR.
func (r Refusal) Matches(st *metav1.Status) bool {
	if st == nil || st.Status != metav1.StatusFailure || st.Code != r.Code || st.Reason != r.Reason {
		return false
	}
	if r.Prefix {
		return len(st.Message) >= len(r.Message) && st.Message[:len(r.Message)] == r.Message
	}
	return st.Message == r.Message
}

func (r Refusal) String() string {
	msg := strconv.Quote(r.Message)
	if r.Prefix {
		msg += "..."
	}
	return fmt.Sprintf("ERROR %d %s %s", r.Code, r.Reason, msg)
}

// tooLarge is the 504 of a wait for a revision the storage or cache has not reached.
//
// Mirrors pkg/storage/errors.go NewTooLargeResourceVersionError.
func tooLarge(rv int64) *Refusal {
	return &Refusal{Code: 504, Reason: metav1.StatusReasonTimeout, Prefix: true,
		Message: fmt.Sprintf("Timeout: Too large resource version: %d, current: ", rv)}
}

// tooOld is the watch cache's 410 for a watch from before the window it holds.
//
// Mirrors pkg/storage/cacher/watch_cache.go getAllEventsSinceLocked.
func tooOld(rv, oldest int64) *Refusal {
	return &Refusal{Code: 410, Reason: metav1.StatusReasonExpired,
		Message: fmt.Sprintf("too old resource version: %d (%d)", rv, oldest)}
}

// compacted is the etcd3 storage's 410 for a watch whose start etcd compacted.
//
// Mirrors pkg/storage/etcd3/errors.go interpretWatchError.
var compacted = Refusal{Code: 410, Reason: metav1.StatusReasonExpired,
	Message: "The resourceVersion for the provided watch is too old."}

// prevless is the etcd3 storage's 500 for an update or deletion that etcd delivers without its
// previous value (its previous revision was compacted).
//
// Mirrors pkg/storage/etcd3/event.go parseEvent.
func prevless(w Write) *Refusal {
	typ := "PUT"
	if w.Cur == nil {
		typ = "DELETE"
	}
	return &Refusal{Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("Internal error occurred: etcd event received with PrevKv=nil (key=%q, modRevision=%d, type=%s)", w.Key, w.Rev, typ)}
}

// Expectation is what a watch must deliver. Check judges delivered events by it.
type Expectation struct {
	Request   Request
	Selection Selection
	// Replay says the watch starts with the initial replay (History.Initial) at its start revision;
	// EndBookmark that the replay ends with the initial-events-end BOOKMARK at that revision.
	Replay, EndBookmark bool
	// Bookmarks says progress BOOKMARKs may come; BookmarkAtStart that one may carry the start
	// revision itself (else they are all after it).
	Bookmarks, BookmarkAtStart bool
	// Lo and Hi bound the start revision: the snapshot of a replay, else the revision after which
	// changes are delivered. Every revision in between is possible. Floating says the start is picked
	// after the request was answered: any revision from Lo to the history's current one is possible.
	Lo, Hi   int64
	Floating bool
	// Refusal, when not nil, is the one ERROR the watch delivers instead of events; MayRefuse one it
	// may deliver instead of events.
	Refusal, MayRefuse *Refusal
	// MayCompactAt, when not 0, is a compaction that may land while an etcd3 storage watch catches
	// up: the watch may then end with the ERROR of its etcd watch, if what it delivered stops short
	// of the compacted revision.
	MayCompactAt int64
}

func (e Expectation) String() string {
	s := fmt.Sprintf("watch of %s %s replay=%t", e.Selection, e.Request, e.Replay)
	switch {
	case e.Refusal != nil:
		return s + " refused with " + e.Refusal.String()
	case e.Floating:
		s += fmt.Sprintf(" start=[%d,now]", e.Lo)
	default:
		s += fmt.Sprintf(" start=[%d,%d]", e.Lo, e.Hi)
	}
	if e.MayRefuse != nil {
		s += " or " + e.MayRefuse.String()
	}
	return s
}

// Storage is the etcd3 storage as a watch finds it when Watch is called.
type Storage struct {
	// Rev is etcd's revision when Watch is called. For a watch-list from a future resourceVersion
	// the caller writes nothing that reaches it before the ERROR came: the storage compares them in
	// the watch's own goroutine.
	Rev int64
	// CompactRev is etcd's last compaction (0: none).
	CompactRev int64
	// ProgressRequested says the test requests progress (RequestWatchProgress): etcd's progress
	// notifications then reach every watch as BOOKMARKs, whatever AllowWatchBookmarks says.
	ProgressRequested bool
}

// ExpectStorage is what a watch of the etcd3 storage must deliver: a watch-list lists at etcd's
// revision once its goroutine runs (so at Rev or later), after refusing a resourceVersion etcd has
// not reached with 504; a watch from "" or "0" without initial events starts at Rev; one from a
// revision starts there, unless etcd compacted past it (410), or compacted exactly the revision
// before a change in its range, which then comes without its previous value (500). Progress
// bookmarks may carry the start revision: etcd reports its current revision.
//
// Mirrors pkg/storage/etcd3/watcher.go Watch, getStartWatchResourceVersion and startWatching.
func (h *History) ExpectStorage(req Request, sel Selection, s Storage) (Expectation, error) {
	n, err := req.revision()
	if err != nil {
		return Expectation{}, err
	}
	e := Expectation{Request: req, Selection: sel, Replay: req.Replays(), EndBookmark: req.EndBookmark(),
		Bookmarks: req.AllowWatchBookmarks || s.ProgressRequested, BookmarkAtStart: true}
	switch {
	case e.Replay && n > s.Rev:
		e.Refusal = tooLarge(n)
	case e.Replay:
		e.Lo, e.Hi, e.Floating = s.Rev, s.Rev, true
	case n == 0:
		e.Lo, e.Hi = s.Rev, s.Rev
	default:
		e.Lo, e.Hi = n, n
		switch {
		case n+1 < s.CompactRev:
			e.Refusal = &compacted
		case n+1 == s.CompactRev:
			if w, ok := h.prevlessAt(sel, s.CompactRev); ok {
				e.Refusal = prevless(w)
			}
		}
	}
	return e, nil
}

// prevlessAt finds the update or deletion at rev in the key range of sel, whatever its predicate: a
// watch from rev-1 gets it without its previous value once rev is compacted, and the storage refuses
// it before filtering.
func (h *History) prevlessAt(sel Selection, rev int64) (Write, bool) {
	for _, w := range h.Writes {
		if w.Rev == rev && w.Prev != nil && sel.Covers(w.Key) {
			return w, true
		}
	}
	return Write{}, false
}

// Cache is the watch cache as a watch finds it.
type Cache struct {
	// Lo and Hi bound the cache's revision while Watch runs.
	Lo, Hi int64
	// EtcdRev is etcd's revision when Watch is called: what a consistent watch-list waits for.
	EtcdRev int64
	// ListRV is the revision of the cache's last relist: the oldest a watch from a revision may
	// start at.
	ListRV int64
	// MayTimeOut says a watch-list's wait for the cache to reach its revision may run out (the test
	// moves the cache's clock without bound while Watch waits).
	MayTimeOut bool
}

// ExpectCache is what a watch of the watch cache must deliver: a watch-list waits for the cache to
// reach its resourceVersion (etcd's for "", none for "0") and starts at the cache's revision then,
// after refusing a resourceVersion etcd has not reached with 504; a watch from "" without initial
// events starts at etcd's revision; one from "0" wherever the cache is; one from a revision there,
// unless the cache relisted since (410). Bookmarks are allowed if asked for, each after the start.
//
// Mirrors pkg/storage/cacher/cacher.go Watch, watch_cache.go waitUntilFreshAndBlock and
// getAllEventsSinceLocked, cache_watcher.go process.
func (h *History) ExpectCache(req Request, sel Selection, c Cache) (Expectation, error) {
	n, err := req.revision()
	if err != nil {
		return Expectation{}, err
	}
	e := Expectation{Request: req, Selection: sel, Replay: req.Replays(), EndBookmark: req.EndBookmark(),
		Bookmarks: req.AllowWatchBookmarks}
	sie := req.SendInitialEvents
	switch {
	case sie != nil && *sie && n > c.EtcdRev:
		e.Refusal = tooLarge(n)
	case sie != nil && *sie:
		wait := n
		if req.ResourceVersion == "" {
			wait = c.EtcdRev
		}
		e.Lo, e.Hi = max(c.Lo, wait), c.Hi
		if c.MayTimeOut && wait > 0 {
			e.MayRefuse = tooLarge(wait)
		}
	case req.ResourceVersion == "" && sie != nil:
		e.Lo, e.Hi = c.EtcdRev, c.EtcdRev
	case n == 0:
		e.Lo, e.Hi = c.Lo, c.Hi
	default:
		e.Lo, e.Hi = n, n
		if n < c.ListRV {
			e.Refusal = tooOld(n, c.ListRV)
		}
	}
	return e, nil
}
