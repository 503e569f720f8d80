package kube

import (
	"fmt"
	"slices"

	"github.com/listwatch/listwatch/check"
)

// verbs are the verbs Counts counts, in the order it lists them.
var verbs = []Verb{Create, Update, Delete, Get, List}

// Counts counts the history's requests by verb and outcome: 409 is a conflict, another status of
// 300 or more a failure, no answer or a 5xx unknown.
func (h *History) Counts() []check.NameCount {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = string(v)
	}
	return check.CountNames(names, len(h.Operations), func(i int) int {
		return max(0, slices.Index(verbs, h.Operations[i].Verb))
	}, func(i int) check.Outcome {
		op := &h.Operations[i]
		switch {
		case op.Unknown || op.Status == 0 || op.Status >= 500:
			return check.Unknown
		case op.Status == 409:
			return check.Conflict
		case op.Status >= 300:
			return check.Failed
		}
		return check.OK
	})
}

// CheckedOver says what g was checked over, by res's coverage; "partly skipped: no linearization"
// for a guarantee that needs one when the search found none.
func CheckedOver(g check.Info, res *Result) string {
	if g.Skipped(res.Verdict) {
		return "partly skipped: no linearization"
	}
	c := res.Coverage
	switch g.Guarantee {
	case Linearizable:
		return fmt.Sprintf("%d writes (%d took effect), consistent reads", c.Writes+c.Conflicts+c.NotFound+c.Unknown, c.Writes)
	case ReadRV, ReadContent:
		return fmt.Sprintf("%d lists, %d gets", sum(c.Lists), c.Gets)
	case WatchStart:
		return fmt.Sprintf("%d watches", sum(c.Watches))
	case WatchReplay:
		return fmt.Sprintf("%d events (%d replayed)", c.Events, c.EventsChecked)
	case BookmarkOrder:
		return fmt.Sprintf("%d bookmarks", c.Bookmarks)
	case InitialEventsEnd:
		return fmt.Sprintf("%d initial-events-end bookmarks, %d watches with initial events", c.InitialEventsEnd, c.Watches[startInitial])
	case Expired:
		return fmt.Sprintf("%d 410 answers", c.Expired)
	case Validation:
		return fmt.Sprintf("%d refused lists", c.Lists[Invalid])
	}
	return ""
}

// Counts lists what the history exercised, as the report shows it.
func (c Coverage) Counts() []check.Count {
	out := []check.Count{{Name: "requests", N: c.Requests}, {Name: "writes that took effect", N: c.Writes},
		{Name: "conflicts", N: c.Conflicts}, {Name: "not found", N: c.NotFound}, {Name: "unknown outcomes", N: c.Unknown},
		{Name: "gets", N: c.Gets}}
	for _, k := range []string{MostRecent, Any, NotOlderThan, Exact, Continuation, Invalid} {
		out = append(out, check.Count{Name: "lists: " + k, N: c.Lists[k]})
	}
	for _, k := range []string{startExact, startInitial, startNow} {
		out = append(out, check.Count{Name: "watches: " + k, N: c.Watches[k]})
	}
	return append(out, check.Count{Name: "watches resumed", N: c.Resumed},
		check.Count{Name: "watches with selectors", N: c.SelectorWatches}, check.Count{Name: "events", N: c.Events},
		check.Count{Name: "events replayed", N: c.EventsChecked}, check.Count{Name: "bookmarks", N: c.Bookmarks},
		check.Count{Name: "initial-events-end bookmarks", N: c.InitialEventsEnd}, check.Count{Name: "410 Expired", N: c.Expired},
		check.Count{Name: "other errors", N: c.Errors})
}

// WatchesTotal is how many watches the coverage counts, of every start.
func (c Coverage) WatchesTotal() int { return sum(c.Watches) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
