package kube

import (
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/listwatch/listwatch/check"
)

// Semantics of a list's resourceVersion, as the API concepts document's "Semantics for get and
// list" table gives them (https://kubernetes.io/docs/reference/using-api/api-concepts/) and
// k8s.io/apiserver pkg/storage/interfaces.go ValidateListOptions implements them.
const (
	MostRecent   = "MostRecent"   // resourceVersion unset: a consistent read
	Any          = "Any"          // "0"
	NotOlderThan = "NotOlderThan" // N with resourceVersionMatch=NotOlderThan, or N without limit
	Exact        = "Exact"        // N with resourceVersionMatch=Exact, or N with a limit (legacy)
	Continuation = "Continue"     // a page after the first
	Invalid      = "Invalid"      // a combination the apiserver refuses
)

// listSemantics classifies a first page's options.
func listSemantics(o *ListOptions) string {
	switch {
	case invalidList(o) != "":
		return Invalid
	case o.ResourceVersion == "":
		return MostRecent
	case o.ResourceVersion == "0":
		return Any
	case o.ResourceVersionMatch == MatchExact:
		return Exact
	case o.ResourceVersionMatch == MatchNotOlderThan:
		return NotOlderThan
	case o.Limit > 0 && !singleName(o):
		// the legacy case of storage.ValidateListOptions: a recursive list with a limit reads at
		// N; a field selector naming one object makes the list non-recursive
		// (pkg/registry/generic/registry/store.go ListPredicate, MatchesSingle), read not older
		// than N
		return Exact
	}
	return NotOlderThan
}

// singleName reports whether o's field selector names one object (metadata.name=...), which the
// apiserver lists as a read of its key alone.
func singleName(o *ListOptions) bool {
	if o.FieldSelector == "" || o.Continue != "" {
		return false
	}
	sel, err := fields.ParseSelector(o.FieldSelector)
	if err != nil {
		return false
	}
	_, ok := sel.RequiresExactMatch("metadata.name")
	return ok
}

// invalidList returns why the apiserver refuses a list's options, "" if it does not. Mirrors
// k8s.io/apimachinery pkg/apis/meta/internalversion/validation/validation.go ValidateListOptions
// (422) and k8s.io/apiserver pkg/storage/interfaces.go ValidateListOptions (400 for a
// resourceVersion with continue).
func invalidList(o *ListOptions) string {
	m := o.ResourceVersionMatch
	switch {
	case m != "" && o.ResourceVersion == "":
		return "resourceVersionMatch is forbidden unless resourceVersion is provided"
	case m != "" && o.Continue != "":
		return "resourceVersionMatch is forbidden when continue is provided"
	case m != "" && m != MatchExact && m != MatchNotOlderThan:
		return fmt.Sprintf("resourceVersionMatch %q is not supported", m)
	case m == MatchExact && o.ResourceVersion == "0":
		return `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`
	case o.SendInitialEvents != nil:
		return "sendInitialEvents is forbidden for list"
	case o.Continue != "" && o.ResourceVersion != "" && o.ResourceVersion != "0":
		return "specifying resource version is not allowed when using continue"
	}
	return ""
}

// invalidWatch returns why the apiserver refuses a watch's options, "" if it does not. Mirrors
// validation.go validateWatchOptions (with the WatchList feature on, v0.37's default).
func invalidWatch(o *ListOptions) string {
	m := o.ResourceVersionMatch
	switch {
	case o.SendInitialEvents != nil && m != MatchNotOlderThan:
		return "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
	case m != "" && o.SendInitialEvents == nil:
		return "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
	case m != "" && m != MatchNotOlderThan:
		return fmt.Sprintf("resourceVersionMatch %q is not supported for watch", m)
	}
	return ""
}

func ok2xx(status int) bool { return status >= 200 && status < 300 }

// expiry is a 410 (expired) or a success for a resourceVersion x at time t, of one kind of
// request: watches, or reads at an exact resourceVersion (each has its own window: the watch
// cache's, etcd's).
type expiry struct {
	kind         string
	x            uint64
	t            int64
	op, watch, f int
}

// chains groups list pages: each chain is a first page and the pages that followed it with its
// continue tokens, by the same client.
func (c *checker) chains() [][]int {
	var chains [][]int
	open := map[[2]any]int{} // (client, continue token) -> chain
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		if op.Verb != List {
			continue
		}
		if tok := op.Options.Continue; tok != "" {
			if ci, ok := open[[2]any{op.Client, tok}]; ok {
				delete(open, [2]any{op.Client, tok})
				chains[ci] = append(chains[ci], i)
				if op.List != nil && op.List.Continue != "" {
					open[[2]any{op.Client, op.List.Continue}] = ci
				}
				continue
			}
		}
		chains = append(chains, []int{i})
		if op.List != nil && op.List.Continue != "" {
			open[[2]any{op.Client, op.List.Continue}] = len(chains) - 1
		}
	}
	return chains
}

// checkLists checks every list chain against the write log: the resourceVersion its semantics
// allow, the items of the state at that resourceVersion, the pages of one snapshot.
func (c *checker) checkLists() {
	for _, chain := range c.chains() {
		if c.ctx.Err() != nil {
			return // CheckContext returns the context's error
		}
		c.checkChain(chain)
	}
}

// checkListValidation reports invalid options that were served; it needs no write log.
func (c *checker) checkListValidation() {
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		if op.Verb != List {
			continue
		}
		if why := invalidList(op.Options); why != "" && ok2xx(op.Status) {
			c.violate(c.opViolation(Validation, i, "answered %d to options the apiserver refuses (%s): %s",
				op.Status, describeOptions(op.Options), why), i)
		} else if _, err := newSelector(op.Options, c.h.Resource.Namespace); err != nil && ok2xx(op.Status) {
			c.violate(c.opViolation(Validation, i, "answered %d to a bad selector: %v", op.Status, err), i)
		}
	}
}

func (c *checker) checkChain(chain []int) {
	first := &c.h.Operations[chain[0]]
	o := first.Options
	sem := listSemantics(o)
	if sem == Invalid || o.Continue != "" {
		return // refused (checkListValidation), or a continuation whose first page is not here
	}
	sel, err := newSelector(o, c.h.Resource.Namespace)
	if err != nil {
		return
	}
	var n uint64
	if sem == Exact || sem == NotOlderThan {
		if n, err = parseRV(o.ResourceVersion); err != nil {
			return // the apiserver answers 400; nothing to compare
		}
	}
	if first.Status == http.StatusGone {
		if sem == Exact {
			c.expired = append(c.expired, expiry{kind: "list", x: n, t: first.Return, op: chain[0], watch: -1, f: -1})
		} else {
			c.violate(c.opViolation(Expired, chain[0], "410 to a list with %s semantics (%s), which needs no history the server may have dropped",
				sem, describeOptions(o)), chain[0])
		}
		return
	}
	if !ok2xx(first.Status) || first.List == nil {
		return
	}
	m := c.rvOf(first.List.ResourceVersion, chain[0], -1, -1)
	if m == 0 {
		return
	}
	switch {
	case sem == Exact && m != n:
		c.violate(c.opViolation(ReadRV, chain[0], "list with %s semantics (%s) answered at resourceVersion %d", sem, describeOptions(o), m), chain[0])
	case sem == NotOlderThan && m < n:
		c.violate(c.opViolation(ReadRV, chain[0], "list not older than %d answered at older resourceVersion %d", n, m), chain[0])
	case sem == MostRecent && m < c.fresh(first.Call):
		c.violate(c.opViolation(ReadRV, chain[0], "consistent list answered at resourceVersion %d, older than %d, which a request had shown before this list was called",
			m, c.fresh(first.Call)), chain[0])
	}
	if sem == Exact {
		c.served = append(c.served, expiry{kind: "list", x: n, t: first.Call, op: chain[0], watch: -1, f: -1})
	}
	if m < c.initialRV {
		c.res.Coverage.BeforeStart++
		return // the state before the run began is not in the history
	}
	p, q := c.positions(m)
	if r := c.future(p, first.Return); r != nil {
		c.violate(c.opViolation(ReadRV, chain[0], "list at resourceVersion %d, returned at %d, includes operation %d's write, called later at %d",
			m, first.Return, r.Operation, r.op.call), chain[0])
	}
	all, pages, complete := c.chainPages(chain, m)
	var diff string
	for k := p; k <= max(p, q); k++ {
		want := c.filtered(k, sel)
		if complete {
			diff = compareSets(want, all)
		} else {
			diff = compareSubset(want, all)
		}
		if diff == "" {
			return
		}
	}
	c.violate(Violation{Violation: check.Violation{Guarantee: ReadContent, Operation: chain[0], Watch: -1,
		Message: fmt.Sprintf("list (%s semantics, %d page(s)%s) at resourceVersion %d does not hold the state at %d: %s",
			sem, pages, map[bool]string{true: "", false: ", not followed to the end"}[complete], m, m, diff)}, Frame: -1,
		Expected: describeObjects(c.filtered(p, sel)), Received: describeList(all)}, chain[0])
}

// chainPages reads the pages of a list chain answered at m, the first page's resourceVersion,
// judging each continued page's resourceVersion and each page's size: it returns their items,
// how many pages there are and whether the last one ends the list.
func (c *checker) chainPages(chain []int, m uint64) (all []*Object, pages int, complete bool) {
	o := c.h.Operations[chain[0]].Options
	for _, i := range chain {
		op := &c.h.Operations[i]
		if i != chain[0] {
			if op.Status == http.StatusGone {
				c.expired = append(c.expired, expiry{kind: "list", x: m, t: op.Return, op: i, watch: -1, f: -1})
				break
			}
			if !ok2xx(op.Status) || op.List == nil {
				break
			}
			c.served = append(c.served, expiry{kind: "list", x: m, t: op.Call, op: i, watch: -1, f: -1})
			if pm, err := parseRV(op.List.ResourceVersion); err != nil || pm != m {
				c.violate(c.opViolation(ReadRV, i, "continued page answered at resourceVersion %q, not the first page's %d", op.List.ResourceVersion, m), chain[0])
			}
		}
		if o.Limit > 0 && int64(len(op.List.Items)) > o.Limit && op.List.Continue != "" {
			c.violate(c.opViolation(ReadContent, i, "page of %d items for limit %d, with a continue token: a server that ignores the limit returns everything and no token",
				len(op.List.Items), o.Limit), chain[0])
		}
		for j := range op.List.Items {
			all = append(all, &op.List.Items[j])
		}
		pages++
		complete = op.List.Continue == ""
	}
	return all, pages, complete
}

// compareSubset says how got is not a part of want, "" when it is.
func compareSubset(want map[string]*Object, got []*Object) string {
	sub := map[string]*Object{}
	for _, o := range got {
		if w, ok := want[o.Name]; ok {
			sub[o.Name] = w
		}
	}
	return compareSets(sub, got)
}

func describeList(objs []*Object) string {
	s := "["
	for i, o := range objs {
		if i > 0 {
			s += ", "
		}
		s += o.String()
	}
	return s + "]"
}

// checkGets checks gets at a resourceVersion ("0" or N): the object answered must be a state the
// object had, not older than N, written before the get returned.
func (c *checker) checkGets() {
	for i := range c.h.Operations {
		if check.Polled(c.ctx, i) {
			return // CheckContext returns the context's error
		}
		op := &c.h.Operations[i]
		if op.Verb != Get || op.Options == nil || op.Options.ResourceVersion == "" || !ok2xx(op.Status) || op.Result == nil {
			continue
		}
		var n uint64
		if op.Options.ResourceVersion != "0" {
			var err error
			if n, err = parseRV(op.Options.ResourceVersion); err != nil {
				continue
			}
		}
		found := false
		for j := range c.initialItems {
			if c.initialItems[j].same(op.Result) {
				found = true
				next := c.nextWrite(c.initialItems[j].Name, -1)
				if next != nil && next.hi() <= n {
					c.violate(c.opViolation(ReadRV, i, "get not older than %d answered %s, replaced at %d", n, op.Result, next.hi()), i)
				}
			}
		}
		for j := range c.records {
			r := &c.records[j]
			if r.After == nil || !r.After.same(op.Result) {
				continue
			}
			found = true
			if r.op.call > op.Return {
				c.violate(c.opViolation(ReadRV, i, "get answered %s, written by operation %d, called after the get returned", op.Result, r.Operation), i)
			}
			if next := c.nextWrite(r.Name, j); next != nil && next.hi() <= n {
				c.violate(c.opViolation(ReadRV, i, "get not older than %d answered %s, replaced at %d", n, op.Result, next.hi()), i)
			}
		}
		if !found {
			c.violate(c.opViolation(ReadContent, i, "get at resourceVersion %s answered %s, a state the object never had", op.Options.ResourceVersion, op.Result), i)
		}
	}
}

// nextWrite is the first record of name after record j (-1: from the start).
func (c *checker) nextWrite(name string, j int) *record {
	for k := j + 1; k < len(c.records); k++ {
		if c.records[k].Name == name {
			return &c.records[k]
		}
	}
	return nil
}

// checkWindows holds 410s to the retained window: a window never moves back, so once x was
// answered 410, no request for x or below called later may be served (of the same kind).
func (c *checker) checkWindows() {
	for _, e := range c.expired {
		for _, s := range c.served {
			if s.kind != e.kind || s.t <= e.t || s.x > e.x {
				continue
			}
			what := fmt.Sprintf("operation %d", s.op)
			if s.watch >= 0 {
				what = fmt.Sprintf("watch %d", s.watch)
			}
			c.violate(Violation{Violation: check.Violation{Guarantee: Expired, Operation: e.op, Watch: e.watch,
				Message: fmt.Sprintf("410 Expired for resourceVersion %d, yet %s, called after it, was served from resourceVersion %d: the retained window holds it, and a window never moves back",
					e.x, what, s.x)}, Frame: e.f}, -2)
			break
		}
	}
}
