package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/check/etcd"
)

// CapStatus is what a probe of a feature found.
type CapStatus int

// The statuses.
const (
	// Supported: the store answered as etcd does.
	Supported CapStatus = iota
	// Refused: the store answered with an error etcd does not give.
	Refused
	// Differs: the store answered, but not as etcd does.
	Differs
	// NotProbed: the probe was not run (it needs something refused, or the run does not want it).
	NotProbed
	// Skipped: the run left the probe out (ProbeConfig.Skip), and does without the feature.
	Skipped
)

// String names the status as the capability table shows it.
func (s CapStatus) String() string {
	switch s {
	case Supported:
		return "as etcd"
	case Refused:
		return "REFUSED"
	case Differs:
		return "DIFFERS"
	case Skipped:
		return "skipped"
	}
	return "not probed"
}

// Capability is what the probe of one feature found.
type Capability struct {
	Feature Feature
	Status  CapStatus
	// Detail says how the store answered, when not as etcd.
	Detail string
}

// Capabilities is what ProbeCapabilities found.
type Capabilities struct {
	// Product is "kine" when the store names itself kine in an error, "etcd" when its status names
	// an etcd member, "" otherwise.
	Product string
	// Results has one entry per feature, in the order of the constants.
	Results []Capability
}

// Avoid is the set of features found refused or different, or skipped: the workload does without
// them (and, without key versions, without compares on versions).
func (c *Capabilities) Avoid() Features {
	var s Features
	for _, r := range c.Results {
		if r.Status == Refused || r.Status == Differs || r.Status == Skipped {
			s = s.With(r.Feature)
		}
	}
	if s.Has(FeatKeyVersions) {
		s = s.With(FeatCompareVersion)
	}
	return s
}

// NoKeyVersions reports whether the store keeps no key versions: the check then compares answers
// and events without them (etcd.Options.IgnoreVersions).
func (c *Capabilities) NoKeyVersions() bool { return c.status(FeatKeyVersions) == Differs }

// Deviations are the results that are not as etcd.
func (c *Capabilities) Deviations() []Capability {
	var out []Capability
	for _, r := range c.Results {
		if r.Status == Refused || r.Status == Differs {
			out = append(out, r)
		}
	}
	return out
}

// ProbeConfig tunes ProbeCapabilities.
type ProbeConfig struct {
	// Prefix is where the probes write (keys Prefix + "a" and so on); it must be of the run alone.
	Prefix string
	// Compaction: probe compaction too, by compacting the store at its current revision (which
	// every client of the store sees: leave it out on a store others use).
	Compaction bool
	// Timeout bounds each request, and the wait for each answer a probe expects; default 5 s.
	Timeout time.Duration
	// Clock times the waits. Default: the real clock.
	Clock clock.Clock
	// Endpoints is what Status found, for the product.
	Endpoints []Endpoint
	// Skip are probes to leave out (of SkippableProbes): those a store is known to crash on. The
	// features show as Skipped, and the workload and the scenarios do without them.
	Skip Features
}

// SkippableProbes are the probes ProbeConfig.Skip may leave out: each runs on a watch stream of its
// own, and the workload and the scenarios can do without the feature (not so a watch from a past
// revision, which the k8s workload's watches are, nor RequestProgress, which
// request-progress-answered sends wherever it is refused).
const SkippableProbes = Features(FeatWatchFilters | FeatFragment | FeatProgressNotify | FeatClientWatchID)

// SkippableProbe is the skippable probe named name as the capability table names it; ok is false
// when there is none.
func SkippableProbe(name string) (f Feature, ok bool) {
	for _, f := range SkippableProbes.List() {
		if f.String() == name {
			return f, true
		}
	}
	return 0, false
}

// ErrProbe: the store refused the basic writes every probe needs.
var ErrProbe = errors.New("workload: the store refuses the writes every probe needs")

// ProbeCapabilities tries, under cfg.Prefix, each feature of etcd's API a workload may use: deletes
// (of a key and of a range), txns (any compares and branches, several ops, nested, a compare on
// each target), range options (sort, revision filters, serializable, count-only, keys-only, limit,
// a past revision), put options, leases, compaction, and watches (from a past revision, filters,
// fragment, progress_notify, RequestProgress, client-chosen watch IDs), each compared with what
// etcd answers. It fails only when a plain put under the prefix is refused (ErrProbe).
func ProbeCapabilities(ctx context.Context, c *clientv3.Client, cfg ProbeConfig) (*Capabilities, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	conn := c.ActiveConnection()
	p := &prober{ctx: ctx, cfg: cfg, cli: c, kv: pb.NewKVClient(conn), lease: pb.NewLeaseClient(conn),
		watch: pb.NewWatchClient(conn), results: map[Feature]Capability{}}
	if err := p.run(); err != nil {
		return nil, err
	}
	caps := &Capabilities{}
	for i := range numFeatures {
		f := Feature(1) << i
		r, ok := p.results[f]
		switch {
		case cfg.Skip.Has(f):
			r = Capability{Feature: f, Status: Skipped, Detail: "left out by the run"}
		case !ok:
			r = Capability{Feature: f, Status: NotProbed}
		}
		caps.Results = append(caps.Results, r)
		if strings.Contains(r.Detail, "kine") {
			caps.Product = "kine"
		}
	}
	if caps.Product == "" && len(cfg.Endpoints) > 0 && cfg.Endpoints[0].MemberID != 0 {
		caps.Product = "etcd"
	}
	return caps, nil
}

type prober struct {
	ctx     context.Context
	cfg     ProbeConfig
	cli     *clientv3.Client
	kv      pb.KVClient
	lease   pb.LeaseClient
	watch   pb.WatchClient
	results map[Feature]Capability
	rev     int64 // the highest header revision seen
}

func (p *prober) key(s string) []byte { return []byte(p.cfg.Prefix + s) }

func (p *prober) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.ctx, p.cfg.Timeout)
}

func (p *prober) see(h *pb.ResponseHeader) { p.rev = max(p.rev, h.GetRevision()) }

// set records a result; a feature keeps its first deviation.
func (p *prober) set(f Feature, st CapStatus, format string, args ...any) {
	if old, ok := p.results[f]; ok && old.Status != Supported {
		return
	}
	p.results[f] = Capability{Feature: f, Status: st, Detail: fmt.Sprintf(format, args...)}
}

func (p *prober) ok(f Feature) { p.set(f, Supported, "") }

// refused records err as a refusal of f and reports whether there was one.
func (p *prober) refused(f Feature, err error) bool {
	if err == nil {
		return false
	}
	p.set(f, Refused, "%s", rpctypes.ErrorDesc(err))
	return true
}

func (p *prober) put(key, value string, opts ...func(*pb.PutRequest)) (*pb.PutResponse, error) {
	ctx, cancel := p.call()
	defer cancel()
	r := &pb.PutRequest{Key: p.key(key), Value: []byte(value)}
	for _, o := range opts {
		o(r)
	}
	resp, err := p.kv.Put(ctx, r)
	if err == nil {
		p.see(resp.Header)
	}
	return resp, err
}

func (p *prober) rangeReq(r *pb.RangeRequest) (*pb.RangeResponse, error) {
	ctx, cancel := p.call()
	defer cancel()
	resp, err := p.kv.Range(ctx, r)
	if err == nil {
		p.see(resp.Header)
	}
	return resp, err
}

func (p *prober) get(key string) (*mvccpb.KeyValue, error) {
	resp, err := p.rangeReq(&pb.RangeRequest{Key: p.key(key)})
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0], nil
}

func (p *prober) txn(t *pb.TxnRequest) (*pb.TxnResponse, error) {
	ctx, cancel := p.call()
	defer cancel()
	resp, err := p.kv.Txn(ctx, t)
	if err == nil {
		p.see(resp.Header)
	}
	return resp, err
}

func keysOf(kvs []*mvccpb.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

func (p *prober) run() error {
	pa, err := p.put("a", "1")
	if err != nil {
		return fmt.Errorf("%w: put %s: %s", ErrProbe, p.key("a"), rpctypes.ErrorDesc(err))
	}
	ra := pa.Header.GetRevision()
	for _, k := range []string{"b", "c"} {
		if _, err := p.put(k, "1"); err != nil {
			return fmt.Errorf("%w: put %s: %s", ErrProbe, p.key(k), rpctypes.ErrorDesc(err))
		}
	}
	rc := p.rev
	if _, err := p.put("a", "2"); err != nil {
		return fmt.Errorf("%w: put %s: %s", ErrProbe, p.key("a"), rpctypes.ErrorDesc(err))
	}
	if kv, err := p.get("a"); !p.refused(FeatKeyVersions, err) {
		switch {
		case kv == nil:
			p.set(FeatKeyVersions, Differs, "a key put twice reads as missing")
		case kv.Version != 2:
			p.set(FeatKeyVersions, Differs, "a key put twice reads as version %d: etcd gives 2", kv.Version)
		default:
			p.ok(FeatKeyVersions)
		}
	}
	p.probeRanges(ra, rc)
	p.probePuts()
	p.probeDeletes()
	p.probeConditionalDelete()
	p.probeTxns()
	p.probeLeases()
	p.probeWatches(ra)
	if p.cfg.Compaction {
		p.probeCompaction()
	}
	return nil
}

func (p *prober) probeRanges(ra, rc int64) {
	all := func(r *pb.RangeRequest) *pb.RangeRequest {
		r.Key, r.RangeEnd = p.key(""), []byte(etcd.PrefixEnd(etcd.Bytes(p.cfg.Prefix)))
		return r
	}
	want := []string{p.cfg.Prefix + "a", p.cfg.Prefix + "c", p.cfg.Prefix + "b"}
	if resp, err := p.rangeReq(all(&pb.RangeRequest{SortTarget: pb.RangeRequest_MOD, SortOrder: pb.RangeRequest_DESCEND})); !p.refused(FeatSort, err) {
		if got := keysOf(resp.Kvs); !slices.Equal(got, want) {
			p.set(FeatSort, Differs, "sorted by mod revision descending: %q, etcd gives %q", got, want)
		} else {
			p.ok(FeatSort)
		}
	}
	if resp, err := p.rangeReq(all(&pb.RangeRequest{MinModRevision: rc})); !p.refused(FeatRevisionFilters, err) {
		want := []string{p.cfg.Prefix + "a", p.cfg.Prefix + "c"}
		if got := keysOf(resp.Kvs); !slices.Equal(got, want) {
			p.set(FeatRevisionFilters, Differs, "min_mod_revision %d: %q, etcd gives %q", rc, got, want)
		} else {
			p.ok(FeatRevisionFilters)
		}
	}
	if resp, err := p.rangeReq(&pb.RangeRequest{Key: p.key("a"), Serializable: true}); !p.refused(FeatSerializable, err) {
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
			p.set(FeatSerializable, Differs, "a serializable read alone after a put does not see it: %v", resp.Kvs)
		} else {
			p.ok(FeatSerializable)
		}
	}
	if resp, err := p.rangeReq(&pb.RangeRequest{Key: p.key("a"), CountOnly: true}); !p.refused(FeatCountOnly, err) {
		if resp.Count != 1 || len(resp.Kvs) != 0 {
			p.set(FeatCountOnly, Differs, "count-only read of a key: count %d and %d keys, etcd gives count 1 and no keys", resp.Count, len(resp.Kvs))
		} else {
			p.ok(FeatCountOnly)
		}
	}
	if resp, err := p.rangeReq(all(&pb.RangeRequest{KeysOnly: true})); !p.refused(FeatKeysOnly, err) {
		withValue := 0
		for _, kv := range resp.Kvs {
			if len(kv.Value) > 0 {
				withValue++
			}
		}
		if len(resp.Kvs) != 3 || withValue > 0 {
			p.set(FeatKeysOnly, Differs, "keys-only read: %d keys, %d with their value; etcd gives 3 keys without values", len(resp.Kvs), withValue)
		} else {
			p.ok(FeatKeysOnly)
		}
	}
	if resp, err := p.rangeReq(&pb.RangeRequest{Key: p.key("a"), Limit: 2}); !p.refused(FeatLimitOnKey, err) {
		if len(resp.Kvs) != 1 || resp.More {
			p.set(FeatLimitOnKey, Differs, "limit 2 on one key: %d keys, more %v", len(resp.Kvs), resp.More)
		} else {
			p.ok(FeatLimitOnKey)
		}
	}
	if resp, err := p.rangeReq(&pb.RangeRequest{Key: p.key("a"), Revision: ra}); !p.refused(FeatPastRevision, err) {
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
			p.set(FeatPastRevision, Differs, "read at revision %d: %v, etcd gives the value of then, 1", ra, resp.Kvs)
		} else {
			p.ok(FeatPastRevision)
		}
	}
}

func (p *prober) probePuts() {
	resp, err := p.put("a", "3", func(r *pb.PutRequest) { r.PrevKv = true })
	if !p.refused(FeatPutPrevKV, err) {
		if resp.PrevKv == nil || string(resp.PrevKv.Value) != "2" {
			p.set(FeatPutPrevKV, Differs, "prev_kv %v, etcd gives the value before, 2", resp.PrevKv)
		} else {
			p.ok(FeatPutPrevKV)
		}
	}
	if _, err := p.put("a", "", func(r *pb.PutRequest) { r.IgnoreValue = true }); !p.refused(FeatIgnoreValue, err) {
		if kv, err := p.get("a"); err != nil || kv == nil || string(kv.Value) != "3" {
			p.set(FeatIgnoreValue, Differs, "after a put with ignore_value the key is %v (%v), etcd keeps its value 3", kv, err)
		} else {
			p.ok(FeatIgnoreValue)
		}
	}
	if _, err := p.put("a", "4", func(r *pb.PutRequest) { r.IgnoreLease = true }); !p.refused(FeatIgnoreLease, err) {
		p.ok(FeatIgnoreLease)
	}
	// the probes after this one need a at 4
	if kv, err := p.get("a"); err != nil || kv == nil || string(kv.Value) != "4" {
		_, _ = p.put("a", "4")
	}
}

// del deletes key with the DeleteRange RPC, or where that is refused with the apiserver's
// conditional delete txn.
func (p *prober) del(key string) error {
	if !p.results[FeatDeleteRPC].Status.usable() {
		kv, err := p.get(key)
		if err != nil || kv == nil {
			return fmt.Errorf("read %s before deleting it: %v", key, err)
		}
		resp, err := p.txn(&pb.TxnRequest{
			Compare: []*pb.Compare{{Key: p.key(key), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: kv.ModRevision}}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: p.key(key)}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: p.key(key)}}}},
		})
		if err == nil && !resp.Succeeded {
			err = errors.New("the conditional delete failed its compare")
		}
		return err
	}
	ctx, cancel := p.call()
	defer cancel()
	resp, err := p.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: p.key(key)})
	if err == nil {
		p.see(resp.Header)
	}
	return err
}

func (s CapStatus) usable() bool { return s == Supported || s == NotProbed }

// probeConditionalDelete tries the apiserver's delete (pkg/storage/etcd3/store.go
// conditionalDelete): mod_revision == X ? delete : get, without prev_kv.
func (p *prober) probeConditionalDelete() {
	if _, err := p.put("cd", "1"); err != nil {
		return
	}
	kv, err := p.get("cd")
	if err != nil || kv == nil {
		return
	}
	resp, err := p.txn(&pb.TxnRequest{
		Compare: []*pb.Compare{{Key: p.key("cd"), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: kv.ModRevision}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: p.key("cd")}}}},
		Failure: []*pb.RequestOp{rangeOp(p.key("cd"))},
	})
	if p.refused(FeatConditionalDelete, err) {
		return
	}
	var d *pb.DeleteRangeResponse
	if len(resp.Responses) == 1 {
		d = resp.Responses[0].GetResponseDeleteRange()
	}
	switch {
	case !resp.Succeeded || d == nil || d.Deleted != 1:
		p.set(FeatConditionalDelete, Differs, "answered %v, etcd: succeeded, deleted 1", resp)
	case len(d.PrevKvs) > 0:
		p.set(FeatConditionalDelete, Differs, "answers %d prev_kvs not asked for (etcd gives none)", len(d.PrevKvs))
	default:
		p.ok(FeatConditionalDelete)
	}
}

func (p *prober) probeDeletes() {
	ctx, cancel := p.call()
	resp, err := p.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: p.key("c")})
	cancel()
	if p.refused(FeatDeleteRPC, err) {
		p.set(FeatDeleteRange, Refused, "deletes are refused")
		return
	}
	p.see(resp.Header)
	if resp.Deleted != 1 {
		p.set(FeatDeleteRPC, Differs, "delete of one key: deleted %d, etcd gives 1", resp.Deleted)
	} else {
		p.ok(FeatDeleteRPC)
	}
	for _, k := range []string{"r1", "r2"} {
		if _, err := p.put(k, "1"); err != nil {
			p.set(FeatDeleteRange, NotProbed, "put %s: %s", k, rpctypes.ErrorDesc(err))
			return
		}
	}
	ctx, cancel = p.call()
	resp, err = p.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: p.key("r1"), RangeEnd: p.key("r3")})
	cancel()
	if !p.refused(FeatDeleteRange, err) {
		p.see(resp.Header)
		if resp.Deleted != 2 {
			p.set(FeatDeleteRange, Differs, "delete of a range of two keys: deleted %d", resp.Deleted)
		} else {
			p.ok(FeatDeleteRange)
		}
	}
}

func putOp(key []byte, value string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: []byte(value)}}}
}

func rangeOp(key []byte) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key}}}
}

func (p *prober) probeTxns() {
	valueIs := func(v string) *pb.Compare {
		return &pb.Compare{Key: p.key("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte(v)}}
	}
	resp, err := p.txn(&pb.TxnRequest{Compare: []*pb.Compare{valueIs("4")}, Success: []*pb.RequestOp{putOp(p.key("t1"), "1")},
		Failure: []*pb.RequestOp{rangeOp(p.key("a"))}})
	if p.refused(FeatTxn, err) {
		for _, f := range []Feature{FeatMultiOpTxn, FeatNestedTxn, FeatCompareVersion, FeatCompareCreate, FeatCompareMod, FeatCompareValue, FeatCompareLease} {
			p.set(f, NotProbed, "txns of this shape are refused")
		}
		return
	}
	if !resp.Succeeded {
		p.set(FeatTxn, Differs, "a txn whose compare holds took its failure branch")
	} else {
		p.ok(FeatTxn)
	}
	resp, err = p.txn(&pb.TxnRequest{Success: []*pb.RequestOp{putOp(p.key("t2"), "1"), putOp(p.key("t3"), "1")}})
	if !p.refused(FeatMultiOpTxn, err) {
		t2, _ := p.get("t2")
		t3, _ := p.get("t3")
		if len(resp.Responses) != 2 || t2 == nil || t3 == nil || t2.ModRevision != t3.ModRevision || t2.ModRevision != resp.Header.GetRevision() {
			p.set(FeatMultiOpTxn, Differs, "a txn of two puts: %d answers, keys %v and %v, etcd writes both at the txn's revision", len(resp.Responses), t2, t3)
		} else {
			p.ok(FeatMultiOpTxn)
		}
	}
	resp, err = p.txn(&pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
		Compare: []*pb.Compare{valueIs("4")}, Success: []*pb.RequestOp{rangeOp(p.key("a"))}}}}}})
	if !p.refused(FeatNestedTxn, err) {
		if len(resp.Responses) != 1 || resp.Responses[0].GetResponseTxn() == nil || !resp.Responses[0].GetResponseTxn().Succeeded ||
			len(resp.Responses[0].GetResponseTxn().Responses) != 1 {
			p.set(FeatNestedTxn, Differs, "a nested txn answered %v", resp.Responses)
		} else {
			p.ok(FeatNestedTxn)
		}
	}
	kv, err := p.get("a")
	if err != nil || kv == nil {
		return
	}
	for _, c := range []struct {
		f            Feature
		target       pb.Compare_CompareTarget
		right, wrong func(*pb.Compare)
	}{
		{FeatCompareVersion, pb.Compare_VERSION, func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Version{Version: kv.Version} },
			func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Version{Version: kv.Version + 1} }},
		{FeatCompareCreate, pb.Compare_CREATE, func(c *pb.Compare) { c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: kv.CreateRevision} },
			func(c *pb.Compare) { c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: kv.CreateRevision + 1} }},
		{FeatCompareMod, pb.Compare_MOD, func(c *pb.Compare) { c.TargetUnion = &pb.Compare_ModRevision{ModRevision: kv.ModRevision} },
			func(c *pb.Compare) { c.TargetUnion = &pb.Compare_ModRevision{ModRevision: kv.ModRevision + 1} }},
		{FeatCompareValue, pb.Compare_VALUE, func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Value{Value: kv.Value} },
			func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Value{Value: append(bytes.Clone(kv.Value), 'x')} }},
		{FeatCompareLease, pb.Compare_LEASE, func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Lease{Lease: kv.Lease} },
			func(c *pb.Compare) { c.TargetUnion = &pb.Compare_Lease{Lease: kv.Lease + 1} }},
	} {
		var answers []bool
		for _, set := range []func(*pb.Compare){c.right, c.wrong} {
			cmp := &pb.Compare{Key: p.key("a"), Target: c.target, Result: pb.Compare_EQUAL}
			set(cmp)
			resp, err := p.txn(&pb.TxnRequest{Compare: []*pb.Compare{cmp}, Success: []*pb.RequestOp{rangeOp(p.key("a"))}})
			if p.refused(c.f, err) {
				break
			}
			answers = append(answers, resp.Succeeded)
		}
		switch {
		case len(answers) < 2:
		case !answers[0] || answers[1]:
			p.set(c.f, Differs, "a compare that holds succeeded: %v, one that does not: %v", answers[0], answers[1])
		default:
			p.ok(c.f)
		}
	}
}

func (p *prober) probeLeases() {
	ctx, cancel := p.call()
	defer cancel()
	before := p.rev
	g1, err := p.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 600})
	if p.refused(FeatLeases, err) {
		return
	}
	g2, err := p.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 600})
	if p.refused(FeatLeases, err) {
		return
	}
	switch {
	case g1.ID == 0 || g1.ID == g2.ID:
		p.set(FeatLeases, Differs, "two grants of a TTL of 600 s answered the IDs %d and %d (etcd gives distinct IDs)", g1.ID, g2.ID)
		return
	case g1.Header.GetRevision() < before:
		p.set(FeatLeases, Differs, "a grant answered with header revision %d, below the store's %d", g1.Header.GetRevision(), before)
		return
	}
	if _, err := p.put("l", "1", func(r *pb.PutRequest) { r.Lease = g1.ID }); p.refused(FeatLeases, err) {
		return
	}
	if _, err := p.cli.KeepAliveOnce(ctx, clientv3.LeaseID(g1.ID)); p.refused(FeatLeases, err) {
		return
	}
	if _, err := p.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g1.ID}); p.refused(FeatLeases, err) {
		return
	}
	_, _ = p.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g2.ID})
	if kv, err := p.get("l"); err != nil || kv != nil {
		p.set(FeatLeases, Differs, "the key of a revoked lease is still there (%v, %v)", kv, err)
		return
	}
	p.ok(FeatLeases)
}

func (p *prober) probeCompaction() {
	ctx, cancel := p.call()
	defer cancel()
	if _, err := p.put("k", "1"); err != nil {
		return
	}
	cur := p.rev
	if _, err := p.put("k", "2"); err != nil {
		return
	}
	if _, err := p.kv.Compact(ctx, &pb.CompactionRequest{Revision: cur, Physical: true}); p.refused(FeatCompaction, err) {
		return
	}
	_, below := p.rangeReq(&pb.RangeRequest{Key: p.key("k"), Revision: cur - 1})
	at, err := p.rangeReq(&pb.RangeRequest{Key: p.key("k"), Revision: cur})
	switch {
	case rpctypes.ErrorDesc(below) != rpctypes.ErrCompacted.Error():
		p.set(FeatCompaction, Differs, "after a compaction at %d, a read at %d answered %v, etcd: %v", cur, cur-1, below, rpctypes.ErrCompacted)
	case err != nil || len(at.Kvs) != 1 || string(at.Kvs[0].Value) != "1":
		p.set(FeatCompaction, Differs, "after a compaction at %d, a read at %d answered %v (%v), etcd gives the value then", cur, cur, at, err)
	default:
		p.ok(FeatCompaction)
	}
}
