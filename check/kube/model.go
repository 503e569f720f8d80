package kube

import (
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strings"

	"github.com/anishathalye/porcupine"
)

// outcome is what an operation's answer says happened.
type outcome uint8

const (
	outOK       outcome = iota // 2xx
	outExists                  // 409 AlreadyExists
	outConflict                // 409 Conflict (a failed precondition)
	outNotFound                // 404
	outRefused                 // another definite refusal: changed nothing
	outUnknown                 // no answer, or a 5xx: may or may not have taken effect
)

// outcomeOf classifies an answer as the apiserver's status codes mean it
// (k8s.io/apimachinery pkg/api/errors): 409 with reason AlreadyExists from a create, 409 Conflict
// from a failed precondition, 404 NotFound; a 5xx (a storage timeout included: "the server was
// unable to return a response in the time allotted, but may still be processing the request")
// leaves the outcome unknown; any other 4xx refused the request before it was stored.
func outcomeOf(op *Operation) outcome {
	switch {
	case op.Unknown || op.Status == 0:
		return outUnknown
	case op.Status >= 200 && op.Status < 300:
		return outOK
	case op.Status == http.StatusConflict && op.Error != nil && op.Error.Reason == "AlreadyExists":
		return outExists
	case op.Status == http.StatusConflict:
		return outConflict
	case op.Status == http.StatusNotFound:
		return outNotFound
	case op.Status >= 500:
		return outUnknown
	}
	return outRefused
}

// kop is an operation prepared for the search: the writes, and the consistent reads (get and list
// with resourceVersion unset), which are linearizable.
type kop struct {
	index  int
	client int
	call   int64
	ret    int64 // math.MaxInt64 when the outcome is unknown
	verb   Verb
	name   int // name id; -1 for a list
	out    outcome
	// rv is the resourceVersion the answer shows (a write's new one, a list's), 0 if none.
	rv uint64
	// state is the object a successful write leaves (nil for a delete), its uid and rv as known.
	state *Object
	// precondition of an update or delete; empty fields are not checked.
	preUID, preRV string
	// got is a get's answer, list a list's.
	got  *Object
	list *ListResult
	sel  *selector
	// resolved: an unknown-outcome write that some answer or watch showed, so it took effect.
	resolved bool
}

// isWrite reports whether op may change the state.
func (op *kop) isWrite() bool { return op.verb == Create || op.verb == Update || op.verb == Delete }

// mobj is one name's state in the model; src is what wrote it (an index into checker.versions).
type mobj struct {
	present bool
	uid     string // "" when not known
	rv      uint64 // 0 when not known
	src     int
}

// mstate is the model's state: every name's object, and floor, the highest resourceVersion the
// linearization has reached (the last write's, or a consistent read's).
type mstate struct {
	objs  []mobj
	floor uint64
}

func (s *mstate) with(name int, o mobj, floor uint64) *mstate {
	n := &mstate{objs: make([]mobj, len(s.objs)), floor: floor}
	copy(n.objs, s.objs)
	n.objs[name] = o
	return n
}

// step applies op to s. It returns the states op may leave: none when op's answer is impossible
// in s, two for an unknown-outcome write that may or may not have taken effect.
func (c *checker) step(s *mstate, op *kop) []*mstate {
	switch op.verb {
	case Get:
		cur := s.objs[op.name]
		switch op.out {
		case outOK:
			if cur.present && cur.rv != 0 && c.objectOf(cur).same(op.got) {
				return []*mstate{s}
			}
		case outNotFound:
			if !cur.present {
				return []*mstate{s}
			}
		}
		return nil
	case List:
		if op.rv < s.floor || !c.listFits(s, op) {
			return nil
		}
		return []*mstate{{objs: s.objs, floor: op.rv}}
	}
	cur := s.objs[op.name]
	applies := false // whether the write's preconditions hold in s
	switch op.verb {
	case Create:
		applies = !cur.present
	case Update, Delete:
		applies = cur.present &&
			(op.preUID == "" || (cur.uid != "" && op.preUID == cur.uid)) &&
			(op.preRV == "" || (cur.rv != 0 && op.preRV == rvString(cur.rv)))
	}
	rv := c.writeRV(op, cur)
	apply := func() *mstate {
		// a write takes a resourceVersion above the floor: an unknown one at least the next
		floor := s.floor + 1
		if rv != 0 {
			floor = rv
		}
		if op.verb == Delete {
			return s.with(op.name, mobj{}, floor)
		}
		uid := cur.uid
		if op.verb == Create || op.state.UID != "" {
			uid = op.state.UID
		}
		return s.with(op.name, mobj{present: true, uid: uid, rv: op.rv, src: op.index}, floor)
	}
	switch op.out {
	case outOK:
		if !applies || (rv != 0 && rv <= s.floor) {
			return nil
		}
		if op.verb == Update && op.state.UID != "" && cur.uid != "" && op.state.UID != cur.uid {
			return nil
		}
		return []*mstate{apply()}
	case outExists:
		if op.verb == Create && cur.present {
			return []*mstate{s}
		}
	case outConflict:
		if (op.verb == Update || op.verb == Delete) && cur.present && !applies {
			return []*mstate{s}
		}
	case outNotFound:
		if (op.verb == Update || op.verb == Delete) && !cur.present {
			return []*mstate{s}
		}
	case outRefused:
		return []*mstate{s}
	case outUnknown:
		if op.resolved {
			if !applies || op.rv <= s.floor {
				return nil
			}
			return []*mstate{apply()}
		}
		if applies && (rv == 0 || rv > s.floor) {
			return []*mstate{s, apply()}
		}
		return []*mstate{s}
	}
	return nil
}

// writeRV is the resourceVersion write op takes when it applies to cur: its answer's, or for a
// delete answered without the object, the one the watches saw the deletion of cur's uid at; 0
// when unknown.
func (c *checker) writeRV(op *kop, cur mobj) uint64 {
	if op.rv == 0 && op.verb == Delete && cur.uid != "" {
		return c.delRV[cur.uid]
	}
	return op.rv
}

// listFits reports whether a consistent list page fits s: its items are objects of s its
// selector admits, all of them unless a continue token says more follow.
func (c *checker) listFits(s *mstate, op *kop) bool {
	seen := map[string]bool{}
	for i := range op.list.Items {
		it := &op.list.Items[i]
		id, ok := c.names[it.Name]
		if !ok || seen[it.Name] {
			return false
		}
		seen[it.Name] = true
		cur := s.objs[id]
		if !cur.present || cur.rv == 0 || !c.objectOf(cur).same(it) || !op.sel.matches(it) {
			return false
		}
	}
	if op.list.Continue != "" {
		return true
	}
	for id, o := range s.objs {
		if o.present && !seen[c.nameList[id]] {
			if o.rv == 0 {
				return false // an object the list would have shown, and so made known
			}
			if op.sel.matches(c.objectOf(o)) {
				return false
			}
		}
	}
	return true
}

// objectOf is the object a model entry stands for.
func (c *checker) objectOf(o mobj) *Object {
	v := c.versions[o.src]
	obj := &Object{Name: v.Name, UID: o.uid, Labels: v.Labels, Annotations: v.Annotations}
	if o.rv != 0 {
		obj.ResourceVersion = rvString(o.rv)
	}
	return obj
}

func (c *checker) initialState() *mstate {
	s := &mstate{objs: make([]mobj, len(c.nameList)), floor: c.initialRV}
	for i, it := range c.initialItems {
		rv, _ := parseRV(it.ResourceVersion)
		s.objs[c.names[it.Name]] = mobj{present: true, uid: it.UID, rv: rv, src: initialSrc(i)}
	}
	return s
}

// initialSrc is the versions index of the initial list's item i (writes use their operation index).
func initialSrc(i int) int { return -(i + 1) }

func (s *mstate) equal(o *mstate) bool {
	if s.floor != o.floor || len(s.objs) != len(o.objs) {
		return false
	}
	for i := range s.objs {
		if s.objs[i] != o.objs[i] {
			return false
		}
	}
	return true
}

func (s *mstate) hash() uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	put(s.floor)
	for _, o := range s.objs {
		if o.present {
			put(o.rv)
			put(uint64(int64(o.src)))
			h.Write([]byte(o.uid))
		} else {
			put(math.MaxUint64)
		}
	}
	return h.Sum64()
}

func (c *checker) describeState(s *mstate) string {
	var parts []string
	for id, o := range s.objs {
		if o.present {
			parts = append(parts, c.objectOf(o).String())
		} else {
			_ = id
		}
	}
	return fmt.Sprintf("at %d: {%s}", s.floor, strings.Join(parts, ", "))
}

// model is the porcupine model of a namespaced resource: objects by name with resourceVersions.
// Inputs are *kop, outputs unused (the answer is part of the operation).
func (c *checker) model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{c.initialState()} },
		Step: func(state, input, _ any) []any {
			next := c.step(state.(*mstate), input.(*kop))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(*mstate).equal(b.(*mstate)) },
		Hash:  func(s any) uint64 { return s.(*mstate).hash() },
		DescribeOperation: func(input, _ any) string {
			return c.describeOp(input.(*kop))
		},
		DescribeState: func(s any) string { return c.describeState(s.(*mstate)) },
	}
	return nm.ToModel()
}

func (c *checker) describeOp(op *kop) string {
	o := &c.h.Operations[op.index]
	return fmt.Sprintf("#%d %s", op.index, describeOperation(o))
}

// describeOperation says on one line what an operation asked and what it was answered.
func describeOperation(o *Operation) string {
	var b strings.Builder
	b.WriteString(string(o.Verb))
	if o.Name != "" {
		b.WriteString(" " + o.Name)
	}
	if o.Object != nil && o.Object.ResourceVersion != "" {
		fmt.Fprintf(&b, " if rv=%s", o.Object.ResourceVersion)
	}
	if o.Precondition != nil && o.Precondition.ResourceVersion != "" {
		fmt.Fprintf(&b, " if rv=%s", o.Precondition.ResourceVersion)
	}
	if o.Options != nil {
		b.WriteString(" " + describeOptions(o.Options))
	}
	b.WriteString(" -> ")
	switch {
	case o.Unknown || o.Status == 0:
		b.WriteString("no answer")
	case o.Error != nil:
		b.WriteString(o.Error.String())
	case o.List != nil:
		fmt.Fprintf(&b, "%d items at rv %s", len(o.List.Items), o.List.ResourceVersion)
		if o.List.Continue != "" {
			b.WriteString(" (more)")
		}
	case o.Result != nil:
		fmt.Fprintf(&b, "%d %s", o.Status, o.Result)
	default:
		fmt.Fprintf(&b, "%d", o.Status)
	}
	return b.String()
}

// describeOptions shows the query parameters set.
func describeOptions(o *ListOptions) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	if o.ResourceVersion != "" {
		add("resourceVersion", o.ResourceVersion)
	} else {
		parts = append(parts, "resourceVersion unset")
	}
	add("resourceVersionMatch", o.ResourceVersionMatch)
	if o.Limit != 0 {
		add("limit", fmt.Sprint(o.Limit))
	}
	if o.Continue != "" {
		add("continue", "…")
	}
	add("labelSelector", o.LabelSelector)
	add("fieldSelector", o.FieldSelector)
	if o.SendInitialEvents != nil {
		add("sendInitialEvents", fmt.Sprint(*o.SendInitialEvents))
	}
	if o.AllowWatchBookmarks {
		add("allowWatchBookmarks", "true")
	}
	return strings.Join(parts, " ")
}
