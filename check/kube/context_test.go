package kube

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/internal/testutil"
)

// bigHistory is n creates one after the other, a watch from before them that sees each, and a
// list of them all at the end.
func bigHistory(n int) *History {
	h := &History{Resource: baseHistory().Resource, Initial: &ListResult{ResourceVersion: "10"}}
	w := Watch{Client: 1, Call: 1, Options: ListOptions{ResourceVersion: "10"}, Status: 200, End: int64(10*n + 100), EndReason: EndClosed}
	var items []Object
	for i := range n {
		name := fmt.Sprintf("o%05d", i)
		o := obj(name, "u"+name, 11+i, "x", fmt.Sprintf("c0-%d", i+1))
		t := int64(10 * (i + 1))
		h.Operations = append(h.Operations, Operation{Client: 0, Call: t, Return: t + 1, Verb: Create, Name: name,
			Object: &Object{Name: name, Labels: o.Labels, Annotations: o.Annotations}, Status: 201, Result: o})
		w.Frames = append(w.Frames, frame(t+2, Added, o))
		items = append(items, *o)
	}
	end := int64(10*n + 50)
	h.Operations = append(h.Operations, Operation{Client: 0, Call: end, Return: end + 1, Verb: List, Options: &ListOptions{},
		Status: 200, List: &ListResult{ResourceVersion: strconv.Itoa(10 + n), Items: items}})
	h.Watches = []Watch{w}
	return h
}

// TestCheckContextStops: a context cancelled as a part of the check begins stops the check of a
// large history in that part (porcupine's search included): CheckContext returns
// context.Canceled naming it, and no later part begins.
func TestCheckContextStops(t *testing.T) {
	h := bigHistory(1000)
	phases := []string{check.PhaseSearch, PhaseLists, check.PhaseWatches}
	testutil.CancelAtEachPhase(t, phases, func(ctx context.Context, onPhase func(string)) (bool, error) {
		res, err := CheckContext(ctx, h, Options{Phase: onPhase})
		return res != nil, err
	})
}

// TestCheckContextUncancelled: with a context that does not end, CheckContext finds what Check
// does, violations included.
func TestCheckContextUncancelled(t *testing.T) {
	bad := bigHistory(1000)
	bad.Watches[0].Frames[7].Object = obj("o00007", "uo00007", 18, "x", "c0-forged")
	var oks []bool
	for _, h := range []*History{bigHistory(1000), bad} {
		ctx, cancel := context.WithCancel(context.Background())
		got, err := CheckContext(ctx, h, Options{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if want := mustCheck(t, h); !reflect.DeepEqual(got, want) {
			t.Errorf("CheckContext found %s with %d violations, Check %s with %d", got.Verdict, len(got.Violations), want.Verdict, len(want.Violations))
		}
		oks = append(oks, got.OK())
	}
	if !oks[0] || oks[1] {
		t.Errorf("passed: %v, want the history alone, not the one with a forged watch event", oks)
	}
}
