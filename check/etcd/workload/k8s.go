package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/listwatch/listwatch/check/etcd"
)

// compactRevKey is the key the apiserver's compactors coordinate on (under the prefix, so that a
// run on a store an apiserver uses does not touch the apiserver's).
func (r *runner) compactRevKey() etcd.Bytes { return r.p("compact_rev_key") }

// registry is the apiserver's storage prefix, "/registry/", under the workload's prefix.
func (r *runner) registry() string {
	if r.cfg.Prefix == "" {
		return "/registry/"
	}
	return r.cfg.Prefix + "registry/"
}

// k8sResource is a resource type the k8s workload stores; ttl > 0 gives its objects a lease, as
// the apiserver does for events.
type k8sResource struct {
	resource, kind, name string
	ttl                  int64
}

var (
	k8sResources = []k8sResource{
		{resource: "pods", kind: "Pod", name: "pod"},
		{resource: "configmaps", kind: "ConfigMap", name: "config"},
		{resource: "events", kind: "Event", name: "event", ttl: 3600},
	}
	k8sNamespaces = []string{"default", "kube-system", "team-a"}
)

// k8sNamesPerNamespace is small so that the clients contend for the same objects.
const k8sNamesPerNamespace = 6

// Page sizes: the reflector's (client-go tools/pager's default page size) and the small ones that
// make lists span several pages.
const k8sWatchListLimit = 500

// leaseReuse is how many objects share one lease; the apiserver's lease manager reuses a lease for
// a share of its TTL (pkg/storage/etcd3/lease_manager.go), which a run this short never outlasts.
const leaseReuse = 8

// leaseReuseSeconds is the extra TTL the lease manager asks for (min(60 s, 5% of the TTL)).
const leaseReuseSeconds = 60

// k8sObject is the stored value: a Kubernetes-like object. Generation is the counter each update
// raises (the apiserver stores no resourceVersion: the mod revision is the version).
type k8sObject struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   k8sObjectMeta `json:"metadata"`
	Spec       k8sSpec       `json:"spec"`
}

type k8sObjectMeta struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
}

type k8sSpec struct {
	Writer string `json:"writer"`
	Value  int64  `json:"value"`
}

// k8sState is what a client last saw of an object: the apiserver's objState.
type k8sState struct {
	rev   int64
	value etcd.Bytes
}

// errNoBudget ends a client's flow when it has no requests left or must stop.
var errNoBudget = errors.New("workload: client stopped")

// errNoLease: a lease grant answered without a lease.
var errNoLease = errors.New("workload: lease grant answered without a lease")

func succeeded(resp *etcd.Response) bool { return resp.Txn != nil && resp.Txn.Succeeded }

// txnRange is the range response at position i of a txn's answer, nil if there is none.
func txnRange(resp *etcd.Response, i int) *etcd.RangeResponse {
	if resp.Txn == nil || i >= len(resp.Txn.Responses) {
		return nil
	}
	return resp.Txn.Responses[i].Range
}

// client is what every workload's client has: its generator and request budget.
type client struct {
	r    *runner
	rng  *rand.Rand
	left int64 // requests left; -1: no bound
}

func (c *client) more() bool { return c.left != 0 && !c.r.stopped() }

// progressAfterWrites is etcd-io/etcd#15220's trigger: a RequestProgress sent on every watch stream
// right after writes, while their events may still be queued on the streams; a store with the bug
// answers it ahead of them. One step in progressTriggerEvery, where RequestProgress is used and
// someone watches.
func (c *client) progressAfterWrites(writes func()) {
	writes()
	if c.r.uses(FeatRequestProgress) && c.r.cfg.Watchers > 0 && c.more() {
		c.r.requestProgress()
	}
}

// progressTriggerEvery: one client step in this many ends with progressAfterWrites.
const progressTriggerEvery = 25

// do sends a request if the client may; errNoBudget otherwise.
func (c *client) do(name string, req etcd.Request) (*etcd.Response, error) {
	if !c.more() {
		return nil, errNoBudget
	}
	if c.left > 0 {
		c.left--
	}
	return c.r.do(name, req)
}

type k8sClient struct {
	client
	id    int
	seq   int
	cache map[etcd.Bytes]k8sState
	lease int64
	uses  int
}

func (r *runner) k8sClient(i int, rng *rand.Rand, budget int64) func() {
	c := &k8sClient{client: client{r: r, rng: rng, left: budget}, id: i, cache: map[etcd.Bytes]k8sState{}}
	return func() {
		for c.more() {
			c.step()
		}
	}
}

func (c *k8sClient) step() {
	res := k8sResources[c.rng.IntN(len(k8sResources))]
	ns := k8sNamespaces[c.rng.IntN(len(k8sNamespaces))]
	name := fmt.Sprintf("%s-%d", res.name, c.rng.IntN(k8sNamesPerNamespace))
	key := etcd.Bytes(fmt.Sprintf("%s%s/%s/%s", c.r.registry(), res.resource, ns, name))
	if c.rng.IntN(progressTriggerEvery) == 0 {
		// the apiserver's consistent read from its cache: a RequestProgress after its writes
		c.progressAfterWrites(func() {
			c.create(res, ns, name, key)
			c.update(res, key)
		})
		return
	}
	switch p := c.rng.IntN(100); {
	case p < 20:
		c.create(res, ns, name, key)
	case p < 50:
		c.update(res, key)
	case p < 65:
		c.delete(key)
	case p < 80:
		_, _ = c.get(key)
	default:
		c.list(res)
	}
}

func (c *k8sClient) encode(obj *k8sObject) etcd.Bytes {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err) // a struct of strings and integers always encodes
	}
	return etcd.Bytes(b)
}

// getLease follows k8s.io/apiserver pkg/storage/etcd3/lease_manager.go GetLease: reuse the last
// lease while it may be, else grant one with a little extra TTL.
func (c *k8sClient) getLease(ttl int64) (int64, error) {
	if !c.r.uses(FeatLeases) {
		return 0, nil // as on a store whose leases do not work: objects without one
	}
	if c.lease != 0 && c.uses < leaseReuse {
		c.uses++
		return c.lease, nil
	}
	resp, err := c.do("lease-grant", etcd.Request{LeaseGrant: &etcd.LeaseGrantRequest{TTL: ttl + leaseReuseSeconds}})
	if err != nil {
		return 0, err
	}
	if resp.LeaseGrant == nil {
		return 0, errNoLease
	}
	c.lease, c.uses = resp.LeaseGrant.ID, 1
	return c.lease, nil
}

// create follows k8s.io/apiserver pkg/storage/etcd3/store.go Create: an OptimisticPut at
// revision 0 (go.etcd.io/etcd/client/v3/kubernetes), with a lease for objects with a TTL.
func (c *k8sClient) create(res k8sResource, ns, name string, key etcd.Bytes) {
	c.seq++
	obj := &k8sObject{APIVersion: "v1", Kind: res.kind,
		Metadata: k8sObjectMeta{Name: name, Namespace: ns, UID: fmt.Sprintf("%d-%d", c.id, c.seq), Generation: 1},
		Spec:     k8sSpec{Writer: fmt.Sprintf("client-%d", c.id), Value: c.rng.Int64N(1000)}}
	var lease int64
	if res.ttl > 0 {
		var err error
		if lease, err = c.getLease(res.ttl); err != nil {
			return
		}
	}
	value := c.encode(obj)
	resp, err := c.do("create", etcd.Request{Txn: &etcd.TxnRequest{
		Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: key}},
		Success: []etcd.RequestOp{{Put: &etcd.PutRequest{Key: key, Value: value, Lease: lease}}},
	}})
	if err == nil && succeeded(resp) {
		c.cache[key] = k8sState{rev: resp.Revision, value: value}
	}
}

// get follows kubernetes.Client.Get: the key alone, limit 1. It returns the object's state, or
// false if it does not exist (or the read failed).
func (c *k8sClient) get(key etcd.Bytes) (k8sState, bool) {
	resp, err := c.do("get", etcd.Request{Range: &etcd.RangeRequest{Key: key, Limit: 1}})
	if err != nil {
		return k8sState{}, false
	}
	return c.remember(key, resp.Range)
}

// remember caches what a read of key returned.
func (c *k8sClient) remember(key etcd.Bytes, rr *etcd.RangeResponse) (k8sState, bool) {
	if rr == nil || len(rr.Kvs) == 0 {
		delete(c.cache, key)
		return k8sState{}, false
	}
	st := k8sState{rev: rr.Kvs[0].ModRevision, value: rr.Kvs[0].Value}
	c.cache[key] = st
	return st, true
}

// current is the state an update or delete starts from: the cached copy (as the apiserver uses
// the watch cache's object) half of the time, else a fresh get.
func (c *k8sClient) current(key etcd.Bytes) (k8sState, bool) {
	if st, ok := c.cache[key]; ok && c.rng.IntN(2) == 0 {
		return st, true
	}
	return c.get(key)
}

// maxAttempts bounds the optimistic retries of one update or delete (the apiserver retries until
// it wins; the bound keeps a client's budget from going to one hot object).
const maxAttempts = 4

// update follows k8s.io/apiserver pkg/storage/etcd3/store.go GuaranteedUpdate: an OptimisticPut
// at the revision of the state it started from, with GetOnFailure, retried from the state the
// failed txn returned.
func (c *k8sClient) update(res k8sResource, key etcd.Bytes) {
	st, ok := c.current(key)
	for attempt := 0; ok && attempt < maxAttempts; attempt++ {
		var obj k8sObject
		if err := json.Unmarshal([]byte(st.value), &obj); err != nil {
			return // not an object of this workload: the apiserver would fail to decode it too
		}
		obj.Metadata.Generation++
		obj.Spec = k8sSpec{Writer: fmt.Sprintf("client-%d", c.id), Value: c.rng.Int64N(1000)}
		var lease int64
		if res.ttl > 0 {
			var err error
			if lease, err = c.getLease(res.ttl); err != nil {
				return
			}
		}
		value := c.encode(&obj)
		resp, err := c.do("update", etcd.Request{Txn: &etcd.TxnRequest{
			Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: key, ModRevision: st.rev}},
			Success: []etcd.RequestOp{{Put: &etcd.PutRequest{Key: key, Value: value, Lease: lease}}},
			Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: key}}},
		}})
		if err != nil {
			return
		}
		if succeeded(resp) {
			c.cache[key] = k8sState{rev: resp.Revision, value: value}
			return
		}
		st, ok = c.remember(key, txnRange(resp, 0))
	}
}

// delete follows k8s.io/apiserver pkg/storage/etcd3/store.go conditionalDelete: an
// OptimisticDelete at the revision of the state it started from, with GetOnFailure, retried.
func (c *k8sClient) delete(key etcd.Bytes) {
	if !c.r.uses(FeatConditionalDelete) {
		_, _ = c.get(key) // a store whose delete answers differ: no deletes, a read instead
		return
	}
	st, ok := c.current(key)
	for attempt := 0; ok && attempt < maxAttempts; attempt++ {
		resp, err := c.do("delete", etcd.Request{Txn: &etcd.TxnRequest{
			Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: key, ModRevision: st.rev}},
			Success: []etcd.RequestOp{{DeleteRange: &etcd.DeleteRangeRequest{Key: key}}},
			Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: key}}},
		}})
		if err != nil {
			return
		}
		if succeeded(resp) {
			delete(c.cache, key)
			return
		}
		st, ok = c.remember(key, txnRange(resp, 0))
	}
}

// list is a client's paginated list of a resource, in all namespaces or one: mostly at the
// latest revision, sometimes at an exact past one (resourceVersionMatch=Exact).
func (c *k8sClient) list(res k8sResource) {
	prefix := c.r.registry() + res.resource + "/"
	if c.rng.IntN(2) == 0 {
		prefix += k8sNamespaces[c.rng.IntN(len(k8sNamespaces))] + "/"
	}
	var limit int64
	switch p := c.rng.IntN(4); p {
	case 0:
	case 1:
		limit = k8sWatchListLimit
	default:
		limit = 1 + c.rng.Int64N(5)
	}
	var rev int64
	if cur := c.r.rev.Load(); c.rng.IntN(5) == 0 && cur > c.r.floor && c.r.uses(FeatPastRevision) {
		rev = max(c.r.floor, cur-c.rng.Int64N(max(1, 2*c.r.cfg.CompactEvery, 20)))
	}
	listPages(c.do, "list", prefix, limit, rev)
}

// listPages lists prefix in pages of limit (0: one page) at revision rev (0: the latest),
// following k8s.io/apiserver pkg/storage/etcd3/store.go GetList over kubernetes.Client.List (one
// range per page, each page after the first from the key after the last one and at the revision
// of the first), and k8s.io/client-go tools/pager/pager.go ListPager.List: when a page after the
// first fails because its revision was compacted, one full list follows. It returns the list's
// revision, 0 if it failed.
func listPages(do func(string, etcd.Request) (*etcd.Response, error), name, prefix string, limit, rev int64) int64 {
	start, end := etcd.Bytes(prefix), etcd.PrefixEnd(etcd.Bytes(prefix))
	withRev := rev
	for page := 0; ; page++ {
		resp, err := do(name, etcd.Request{Range: &etcd.RangeRequest{Key: start, RangeEnd: end, Limit: limit, Revision: withRev}})
		if err != nil {
			if page > 0 && rpctypes.ErrorDesc(err) == rpctypes.ErrCompacted.Error() {
				if resp, err := do(name, etcd.Request{Range: &etcd.RangeRequest{Key: etcd.Bytes(prefix), RangeEnd: end, Revision: rev}}); err == nil {
					return resp.Revision
				}
			}
			return 0
		}
		if withRev == 0 {
			withRev = resp.Revision
		}
		var kvs []etcd.KeyValue
		var count int64
		if resp.Range != nil {
			kvs, count = resp.Range.Kvs, resp.Range.Count
		}
		if limit == 0 || len(kvs) == 0 || int64(len(kvs)) >= count {
			return withRev
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}

// k8sWatcher is a reflector over one prefix: list, watch from the list's revision + 1 with
// prev_kv and progress notifications, resume from the last revision seen + 1 after the watch
// ends, relist after a compaction answer.
func (r *runner) k8sWatcher(i int, rng *rand.Rand) func() {
	return func() {
		res := k8sResources[rng.IntN(len(k8sResources))]
		prefix := r.registry() + res.resource + "/"
		if rng.IntN(3) == 0 {
			prefix += k8sNamespaces[rng.IntN(len(k8sNamespaces))] + "/"
		}
		var rev int64
		for !r.watchEnded() {
			if rev == 0 {
				if rev = listPages(r.do, "watch-list", prefix, k8sWatchListLimit, 0); rev == 0 {
					r.watcherUp(i)
					r.sleep(retryBackoff)
					continue
				}
			}
			w := r.watch(i, etcd.WatchRequest{Key: etcd.Bytes(prefix), RangeEnd: etcd.PrefixEnd(etcd.Bytes(prefix)),
				StartRevision: rev + 1, PrevKV: true, ProgressNotify: r.uses(FeatProgressNotify)}, 5+rng.IntN(60))
			switch {
			case w.compacted != 0:
				rev = 0
			case w.refused:
				rev = 0
				r.sleep(retryBackoff)
			default:
				rev = w.last
			}
		}
	}
}

// k8sCompactor runs the apiserver's compactor loop (k8s.io/apiserver pkg/storage/etcd3/compact.go
// runCompactLoop), one round every CompactEvery revisions instead of every interval.
func (r *runner) k8sCompactor(_ *rand.Rand, wake <-chan struct{}) func() {
	return func() {
		var compactTime, rev int64
		next := r.cfg.CompactEvery + 1
		for r.waitRevision(next, wake) {
			compactTime, rev = r.k8sCompact(compactTime, rev)
			next = r.rev.Load() + r.cfg.CompactEvery
		}
	}
}

// k8sCompact follows k8s.io/apiserver pkg/storage/etcd3/compact.go Compact: whoever swaps the
// version of compact_rev_key from expectVersion compacts at rev, the revision the previous round
// saw; it returns the version and revision the next round starts from.
func (r *runner) k8sCompact(expectVersion, rev int64) (int64, int64) {
	if !r.uses(FeatTxn) || !r.uses(FeatCompareVersion) {
		// a store that refuses the protocol's txn (kine takes it on compact_rev_key only): one
		// compactor that compacts at the revision the previous round saw
		if rev > 0 {
			_, _ = r.do("compact", etcd.Request{Compact: &etcd.CompactRequest{Revision: rev}})
		}
		return expectVersion, r.rev.Load()
	}
	key := r.compactRevKey()
	resp, err := r.do("compact-txn", etcd.Request{Txn: &etcd.TxnRequest{
		Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareVersion, Key: key, Version: expectVersion}},
		Success: []etcd.RequestOp{{Put: &etcd.PutRequest{Key: key, Value: etcd.Bytes(strconv.FormatInt(rev, 10))}}},
		Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: key}}},
	}})
	if err != nil {
		return expectVersion, rev
	}
	cur := resp.Revision
	if !succeeded(resp) {
		if rr := txnRange(resp, 0); rr != nil && len(rr.Kvs) > 0 {
			return rr.Kvs[0].Version, cur
		}
		return expectVersion, cur
	}
	if rev != 0 {
		_, _ = r.do("compact", etcd.Request{Compact: &etcd.CompactRequest{Revision: rev}})
	}
	return expectVersion + 1, cur
}
