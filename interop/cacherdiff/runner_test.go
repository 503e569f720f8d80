package cacherdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/apis/example"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// The history: pods in three namespaces of unequal traffic (c is quiet), a few names each, whose
// labels, node and phase change so that selectors see them enter and leave.
var (
	namespaces  = []string{"a", "b", "c"}
	nsWeights   = []int{60, 35, 5}
	podNames    = []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	appLabels   = []string{"", "x", "y", "z"}
	nodeNames   = []string{"", "node1", "node2"}
	phases      = []example.PodPhase{"Pending", "Running"}
	labelSels   = []string{"", "app=x", "app!=x", "app in (x,y)", "!app", "app"}
	fieldSelFns = []func(r *runner) string{
		func(*runner) string { return "" },
		func(r *runner) string { return "metadata.name=" + pick(r.Rng, podNames) },
		func(r *runner) string { return "metadata.namespace=" + r.namespace() },
		func(r *runner) string { return "spec.nodeName=" + pick(r.Rng, nodeNames[1:]) },
		func(*runner) string { return "spec.nodeName!=node1" },
		func(*runner) string { return "status.phase=Running" },
	}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// runner drives one seed: the same history and the same requests against both caches. It is the
// shared runner's peers (watch_test.go).
type runner struct {
	*diffrun.Runner[watchReq]
	ctx context.Context
	cli *clientv3.Client
	// caches are upstream's (0) and listwatch's (1).
	caches [2]*cachepair.Cache
	h      *kubemodel.History
	// listRV is the revision both caches listed at: the oldest a watch may start from.
	listRV     int64
	compactRev int64
	stats      stats
	// serial numbers the pods made, so that every update writes new bytes.
	serial int
}

// stats are a seed's counts: the writes and reads here, the watches' in the shared runner's Tally.
type stats struct {
	diffrun.Tally
	writes, failedWrites, compactions, lists, pages, gets int
}

func (s stats) String() string {
	return fmt.Sprintf("%d writes, %d failing writes, %d compactions, %d lists (%d further pages), %d gets, "+
		"%d watches (%d stopped), %d events, %d initial-events-end bookmarks, %d other bookmarks, %d ERRORs, "+
		"%d terminations, %d resumes compared; %d watches closed during their initial events started over (judged, not compared)",
		s.writes, s.failedWrites, s.compactions, s.lists, s.pages, s.gets, s.Watches, s.Stops, s.Events, s.EndBookmarks,
		s.Bookmarks, s.Errors, s.Terminations, s.Resumes, s.Restarts)
}

func (s *stats) Add(o stats) {
	s.Tally.Add(o.Tally)
	s.writes += o.writes
	s.failedWrites += o.failedWrites
	s.compactions += o.compactions
	s.lists += o.lists
	s.pages += o.pages
	s.gets += o.gets
}

func (r *runner) namespace() string {
	n := r.Rng.IntN(100)
	for i, w := range nsWeights {
		if n < w {
			return namespaces[i]
		}
		n -= w
	}
	return namespaces[0]
}

func podKey(ns, name string) string { return cachepair.ResourcePrefix + ns + "/" + name }

// randomPod is a pod with random labels, node, phase and a serial annotation, so that every update
// writes new bytes.
func (r *runner) randomPod(ns, name string) *example.Pod {
	r.serial++
	p := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{"serial": strconv.Itoa(r.serial)}}}
	if app := pick(r.Rng, appLabels); app != "" {
		p.Labels = map[string]string{"app": app}
	}
	p.Spec.NodeName = pick(r.Rng, nodeNames)
	p.Status.Phase = pick(r.Rng, phases)
	return p
}

// objectOf is a stored pod as the model holds it: rendered as the caches' events carry it, the JSON
// of the pod at the event's resourceVersion (kubemodel.EventOf reads a delivered pod alike).
func objectOf(key string, pod *example.Pod) (*kubemodel.Object, error) {
	rev, err := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s has resourceVersion %q", key, pod.ResourceVersion)
	}
	l, f, err := cachepair.PodAttrs(pod)
	if err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	render := func(rv int64) string {
		c := pod.DeepCopy()
		c.ResourceVersion = strconv.FormatInt(rv, 10)
		data, err := json.Marshal(c)
		if err != nil {
			return fmt.Sprintf("<%s does not encode: %v>", key, err)
		}
		return string(data)
	}
	return &kubemodel.Object{Key: key, Rev: rev, Labels: l, Fields: f, Render: render}, nil
}

// apply records a write the storage acknowledged with out (nil: a deletion at rev).
func (r *runner) apply(key string, rev int64, out *example.Pod) {
	r.T.Helper()
	var o *kubemodel.Object
	if out != nil {
		var err error
		if o, err = objectOf(key, out); err != nil {
			r.T.Fatal(err)
		}
	}
	if err := r.h.Apply(rev, key, o); err != nil {
		r.T.Fatal(err)
	}
}

func rvOf(t testing.TB, obj runtime.Object) int64 {
	t.Helper()
	rv, err := k8sstorage.APIObjectVersioner{}.ObjectResourceVersion(obj)
	if err != nil {
		t.Fatal(err)
	}
	return int64(rv)
}

// present lists the keys of the objects that exist now.
func (r *runner) present() []string {
	var keys []string
	for _, o := range r.h.StateAt(r.h.Rev) {
		keys = append(keys, o.Key)
	}
	return keys
}

// write makes one random write through a random cache (each passes writes through to its storage
// with the cached object as suggestion) and records it.
func (r *runner) write() {
	r.T.Helper()
	r.writePod(r.caches[r.Rng.IntN(2)], r.namespace(), pick(r.Rng, podNames), r.Rng.IntN(4) == 0)
}

// writePod creates the pod if it is absent, else deletes it (when del) or updates it at random.
func (r *runner) writePod(c *cachepair.Cache, ns, name string, del bool) {
	r.T.Helper()
	key := podKey(ns, name)
	cur := r.h.State(key)
	switch {
	case cur == nil:
		out := &example.Pod{}
		if err := c.Storage.Create(r.ctx, key, r.randomPod(ns, name), out, 0); err != nil {
			r.Fatalf("%s: create %s: %v", c.Name, key, err)
		}
		r.apply(key, rvOf(r.T, out), out)
	case del:
		out := &example.Pod{}
		var pre *k8sstorage.Preconditions
		if r.Rng.IntN(2) == 0 {
			rv := strconv.FormatInt(cur.Rev, 10)
			pre = &k8sstorage.Preconditions{ResourceVersion: &rv}
		}
		if err := c.Storage.Delete(r.ctx, key, out, pre, k8sstorage.ValidateAllObjectFunc, nil, k8sstorage.DeleteOptions{}); err != nil {
			r.Fatalf("%s: delete %s: %v", c.Name, key, err)
		}
		r.apply(key, rvOf(r.T, out), nil)
	default:
		out := &example.Pod{}
		next := r.randomPod(ns, name)
		err := c.Storage.GuaranteedUpdate(r.ctx, key, out, false, nil, k8sstorage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) {
			p := in.(*example.Pod).DeepCopy()
			p.Labels, p.Annotations, p.Spec.NodeName, p.Status.Phase = next.Labels, next.Annotations, next.Spec.NodeName, next.Status.Phase
			return p, nil
		}), nil)
		if err != nil {
			r.Fatalf("%s: update %s: %v", c.Name, key, err)
		}
		r.apply(key, rvOf(r.T, out), out)
	}
	r.stats.writes++
}

// failingWrite sends both caches the same write that must fail, and compares the errors: they must
// not change anything.
func (r *runner) failingWrite() {
	r.T.Helper()
	ns := r.namespace()
	var what string
	var do func(c *cachepair.Cache) error
	keys := r.present()
	switch n := r.Rng.IntN(6); {
	case n == 0 && len(keys) > 0:
		key := pick(r.Rng, keys)
		parts := strings.Split(key, "/")
		what = "create of the existing " + key
		do = func(c *cachepair.Cache) error {
			return c.Storage.Create(r.ctx, key, r.randomPod(parts[2], parts[3]), &example.Pod{}, 0)
		}
	case n == 1:
		key := podKey(ns, "absent")
		what = "update of the absent " + key
		do = func(c *cachepair.Cache) error {
			return c.Storage.GuaranteedUpdate(r.ctx, key, &example.Pod{}, false, nil, k8sstorage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) { return in, nil }), nil)
		}
	case n == 2 && len(keys) > 0:
		key := pick(r.Rng, keys)
		stale := strconv.FormatInt(r.h.State(key).Rev-1, 10)
		what = "update of " + key + " with a stale resourceVersion precondition"
		do = func(c *cachepair.Cache) error {
			return c.Storage.GuaranteedUpdate(r.ctx, key, &example.Pod{}, false, &k8sstorage.Preconditions{ResourceVersion: &stale},
				k8sstorage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) { return in, nil }), nil)
		}
	case n == 3 && len(keys) > 0:
		key := pick(r.Rng, keys)
		uid := types.UID("not-the-uid")
		what = "delete of " + key + " with a wrong uid precondition"
		do = func(c *cachepair.Cache) error {
			return c.Storage.Delete(r.ctx, key, &example.Pod{}, &k8sstorage.Preconditions{UID: &uid}, k8sstorage.ValidateAllObjectFunc, nil, k8sstorage.DeleteOptions{})
		}
	case n == 4:
		key := podKey(ns, "absent")
		what = "delete of the absent " + key
		do = func(c *cachepair.Cache) error {
			return c.Storage.Delete(r.ctx, key, &example.Pod{}, nil, k8sstorage.ValidateAllObjectFunc, nil, k8sstorage.DeleteOptions{})
		}
	default:
		key := podKey(ns, "new")
		what = "create of " + key + " carrying a resourceVersion"
		do = func(c *cachepair.Cache) error {
			p := r.randomPod(ns, "new")
			p.ResourceVersion = "1"
			return c.Storage.Create(r.ctx, key, p, &example.Pod{}, 0)
		}
	}
	var got [2]string
	for i, c := range r.caches {
		err := do(c)
		if err == nil {
			r.Fatalf("%s: the %s succeeded", c.Name, what)
		}
		got[i] = describeError(err)
	}
	if got[0] != got[1] {
		r.Failf("%s: upstream answers %s\nlistwatch answers %s", what, got[0], got[1])
	}
	r.stats.failedWrites++
}

// compact compacts etcd at a random revision since the last compaction and lets both caches observe
// it, as the apiserver's compactor and the caches' compactors would.
func (r *runner) compact() {
	r.T.Helper()
	if r.h.Rev <= r.compactRev+1 {
		return
	}
	rev := r.compactRev + 1 + r.Rng.Int64N(r.h.Rev-r.compactRev)
	after := cachepair.CompactEtcd(r.ctx, r.T, r.cli, rev)
	if err := r.h.Advance(after); err != nil {
		r.T.Fatal(err)
	}
	for _, c := range r.caches {
		c.ObserveCompaction(r.ctx, r.T, rev)
	}
	r.compactRev = rev
	r.stats.compactions++
}
