package etcdrules

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// TestErrorsAreEtcds: every error's message is the one etcd's gRPC API sends for it.
func TestErrorsAreEtcds(t *testing.T) {
	for _, c := range []struct {
		ours, etcd error
	}{
		{ErrEmptyKey, rpctypes.ErrGRPCEmptyKey},
		{ErrKeyNotFound, rpctypes.ErrGRPCKeyNotFound},
		{ErrValueProvided, rpctypes.ErrGRPCValueProvided},
		{ErrLeaseProvided, rpctypes.ErrGRPCLeaseProvided},
		{ErrTooManyOps, rpctypes.ErrGRPCTooManyOps},
		{ErrDuplicateKey, rpctypes.ErrGRPCDuplicateKey},
		{ErrInvalidSortOption, rpctypes.ErrGRPCInvalidSortOption},
		{ErrCompacted, rpctypes.ErrGRPCCompacted},
		{ErrFutureRev, rpctypes.ErrGRPCFutureRev},
		{ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge},
		{ErrLeaseNotFound, rpctypes.ErrGRPCLeaseNotFound},
		{ErrLeaseExists, rpctypes.ErrGRPCLeaseExist},
		{ErrLeaseTTLTooLarge, rpctypes.ErrGRPCLeaseTTLTooLarge},
	} {
		if got, want := c.ours.Error(), rpctypes.ErrorDesc(c.etcd); got != want {
			t.Errorf("%q, etcd says %q", got, want)
		}
	}
	// server/storage/mvcc/watcher.go, which the root module does not depend on
	for err, want := range map[error]string{
		ErrEmptyWatcherRange:  "mvcc: watcher range is empty",
		ErrWatcherDuplicateID: "mvcc: duplicate watch ID provided on the WatchStream",
		ErrWatcherNotExist:    "mvcc: watcher does not exist",
	} {
		if err.Error() != want {
			t.Errorf("%q, etcd says %q", err, want)
		}
	}
}

type S = []byte

func check(t *testing.T, name string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) || (got == nil) != (want == nil) {
		t.Errorf("%s: got %v, want %v", name, got, want)
	}
}

// TestRangeRules follows v3rpc/key_test.go TestCheckRangeRequest, with the empty key added.
func TestRangeRules(t *testing.T) {
	for name, c := range map[string]struct {
		r    RangeRequest[S]
		want error
	}{
		"ascend by create":  {RangeRequest[S]{Key: S("a"), SortOrder: SortAscend, SortTarget: SortByCreate}, nil},
		"descend by value":  {RangeRequest[S]{Key: S("a"), SortOrder: SortDescend, SortTarget: SortByValue}, nil},
		"unknown target":    {RangeRequest[S]{Key: S("a"), SortOrder: SortAscend, SortTarget: 100}, ErrInvalidSortOption},
		"unknown order":     {RangeRequest[S]{Key: S("a"), SortOrder: 200, SortTarget: SortByMod}, ErrInvalidSortOption},
		"negative order":    {RangeRequest[S]{Key: S("a"), SortOrder: -1}, ErrInvalidSortOption},
		"empty key":         {RangeRequest[S]{RangeEnd: S("b")}, ErrEmptyKey},
		"empty key first":   {RangeRequest[S]{SortOrder: 7}, ErrEmptyKey},
		"huge range passes": {RangeRequest[S]{Key: S(strings.Repeat("k", 2*DefaultMaxRequestBytes))}, nil},
	} {
		check(t, name, c.r.Check(), c.want)
	}
}

func TestPutRules(t *testing.T) {
	for name, c := range map[string]struct {
		r    PutRequest[string]
		want error
	}{
		"plain":                     {PutRequest[string]{Key: "a", Value: "v", Lease: 5}, nil},
		"empty key":                 {PutRequest[string]{Value: "v"}, ErrEmptyKey},
		"ignore_value":              {PutRequest[string]{Key: "a", IgnoreValue: true, Lease: 5}, nil},
		"ignore_value with a value": {PutRequest[string]{Key: "a", Value: "v", IgnoreValue: true}, ErrValueProvided},
		"ignore_lease":              {PutRequest[string]{Key: "a", Value: "v", IgnoreLease: true}, nil},
		"ignore_lease with a lease": {PutRequest[string]{Key: "a", Lease: 5, IgnoreLease: true}, ErrLeaseProvided},
		"both, value checked first": {PutRequest[string]{Key: "a", Value: "v", Lease: 5, IgnoreValue: true, IgnoreLease: true}, ErrValueProvided},
		"too large":                 {PutRequest[string]{Key: "a", Value: strings.Repeat("x", DefaultMaxRequestBytes)}, ErrRequestTooLarge},
		"shape before size":         {PutRequest[string]{Value: strings.Repeat("x", DefaultMaxRequestBytes)}, ErrEmptyKey},
	} {
		check(t, name, c.r.Check(Limits{}), c.want)
	}
}

func TestDeleteRules(t *testing.T) {
	check(t, "plain", (&DeleteRangeRequest[S]{Key: S("a"), RangeEnd: S("\x00")}).Check(Limits{}), nil)
	check(t, "empty key", (&DeleteRangeRequest[S]{RangeEnd: S("b")}).Check(Limits{}), ErrEmptyKey)
	check(t, "too large", (&DeleteRangeRequest[S]{Key: make(S, DefaultMaxRequestBytes)}).Check(Limits{}), ErrRequestTooLarge)
	check(t, "limit", (&DeleteRangeRequest[S]{Key: make(S, 100)}).Check(Limits{MaxRequestBytes: 100}), ErrRequestTooLarge)
}

func rangeOp(k string) RequestOp[string] {
	return RequestOp[string]{Range: &RangeRequest[string]{Key: k}}
}
func putOp(k string) RequestOp[string] { return RequestOp[string]{Put: &PutRequest[string]{Key: k}} }
func delOp(k, end string) RequestOp[string] {
	return RequestOp[string]{DeleteRange: &DeleteRangeRequest[string]{Key: k, RangeEnd: end}}
}
func txnOp(then, els []RequestOp[string]) RequestOp[string] {
	return RequestOp[string]{Txn: &TxnRequest[string]{Success: then, Failure: els}}
}

func ops(n int) []RequestOp[string] {
	out := make([]RequestOp[string], n)
	for i := range out {
		out[i] = rangeOp(fmt.Sprint(i))
	}
	return out
}

func compares(n int) []Compare[string] {
	out := make([]Compare[string], n)
	for i := range out {
		out[i] = Compare[string]{Key: fmt.Sprint(i)}
	}
	return out
}

// TestTxnRules follows v3rpc/key.go checkTxnRequest, checkRequestOp and checkIntervals, at the
// limits, quirks included.
func TestTxnRules(t *testing.T) {
	big := strings.Repeat("x", 800*1024)
	for name, c := range map[string]struct {
		r      TxnRequest[string]
		limits Limits
		want   error
	}{
		"empty":                    {TxnRequest[string]{}, Limits{}, nil},
		"128 ops":                  {TxnRequest[string]{Success: ops(128)}, Limits{}, nil},
		"129 ops":                  {TxnRequest[string]{Failure: ops(129)}, Limits{}, ErrTooManyOps},
		"129 compares":             {TxnRequest[string]{Compare: compares(129)}, Limits{}, ErrTooManyOps},
		"the largest counts":       {TxnRequest[string]{Compare: compares(3), Success: ops(3), Failure: ops(4)}, Limits{MaxTxnOps: 3}, ErrTooManyOps},
		"nested budget":            {TxnRequest[string]{Success: []RequestOp[string]{txnOp(ops(127), nil)}}, Limits{}, nil},
		"nested too many":          {TxnRequest[string]{Success: []RequestOp[string]{txnOp(ops(128), nil)}}, Limits{}, ErrTooManyOps},
		"empty compare key":        {TxnRequest[string]{Compare: []Compare[string]{{}}}, Limits{}, ErrEmptyKey},
		"empty op":                 {TxnRequest[string]{Success: []RequestOp[string]{{}}}, Limits{}, ErrKeyNotFound},
		"two requests in one op":   {TxnRequest[string]{Success: []RequestOp[string]{{Range: &RangeRequest[string]{Key: "a"}, Put: &PutRequest[string]{Key: "a"}}}}, Limits{}, ErrInvalidRequestOp},
		"bad range in an op":       {TxnRequest[string]{Failure: []RequestOp[string]{{Range: &RangeRequest[string]{Key: "a", SortTarget: 9}}}}, Limits{}, ErrInvalidSortOption},
		"bad put in an op":         {TxnRequest[string]{Failure: []RequestOp[string]{{Put: &PutRequest[string]{Key: "a", Lease: 1, IgnoreLease: true}}}}, Limits{}, ErrLeaseProvided},
		"empty delete key":         {TxnRequest[string]{Success: []RequestOp[string]{delOp("", "")}}, Limits{}, ErrEmptyKey},
		"put twice":                {TxnRequest[string]{Success: []RequestOp[string]{putOp("a"), putOp("a")}}, Limits{}, ErrDuplicateKey},
		"put in each branch":       {TxnRequest[string]{Success: []RequestOp[string]{putOp("a")}, Failure: []RequestOp[string]{putOp("a")}}, Limits{}, nil},
		"put in a deleted range":   {TxnRequest[string]{Success: []RequestOp[string]{delOp("a", "c"), putOp("b")}}, Limits{}, ErrDuplicateKey},
		"put then delete key":      {TxnRequest[string]{Success: []RequestOp[string]{putOp("a"), delOp("a", "")}}, Limits{}, ErrDuplicateKey},
		"put past a deleted range": {TxnRequest[string]{Success: []RequestOp[string]{delOp("a", "c"), putOp("c")}}, Limits{}, nil},
		"delete to \\x00 is empty": {TxnRequest[string]{Success: []RequestOp[string]{delOp("a", "\x00"), putOp("b"), putOp("a")}}, Limits{}, nil},
		"then/else share":          {TxnRequest[string]{Success: []RequestOp[string]{txnOp([]RequestOp[string]{putOp("a")}, []RequestOp[string]{putOp("a")})}}, Limits{}, nil},
		"nested duplicate":         {TxnRequest[string]{Success: []RequestOp[string]{putOp("a"), txnOp(nil, []RequestOp[string]{putOp("a")})}}, Limits{}, ErrDuplicateKey},
		"two nested txns":          {TxnRequest[string]{Success: []RequestOp[string]{txnOp([]RequestOp[string]{putOp("a")}, nil), txnOp(nil, []RequestOp[string]{putOp("a")})}}, Limits{}, ErrDuplicateKey},
		"nested delete, outer put": {TxnRequest[string]{Success: []RequestOp[string]{putOp("b"), txnOp([]RequestOp[string]{delOp("a", "c")}, nil)}}, Limits{}, ErrDuplicateKey},
		"outer delete, nested put": {TxnRequest[string]{Success: []RequestOp[string]{delOp("a", "c"), txnOp(nil, []RequestOp[string]{putOp("b")})}}, Limits{}, ErrDuplicateKey},
		"too large":                {TxnRequest[string]{Success: []RequestOp[string]{{Put: &PutRequest[string]{Key: "a", Value: big}}, {Put: &PutRequest[string]{Key: "b", Value: big}}}}, Limits{}, ErrRequestTooLarge},
		"read-only, large":         {TxnRequest[string]{Compare: []Compare[string]{{Key: "a", Target: CompareValue, Value: big + big}}, Success: []RequestOp[string]{rangeOp("a")}, Failure: []RequestOp[string]{rangeOp("b")}}, Limits{}, nil},
		"large, no ops":            {TxnRequest[string]{Compare: []Compare[string]{{Key: "a", Target: CompareValue, Value: big + big}}}, Limits{}, nil},
		"nested read is a write":   {TxnRequest[string]{Compare: []Compare[string]{{Key: "a", Target: CompareValue, Value: big + big}}, Success: []RequestOp[string]{txnOp(ops(1), nil)}}, Limits{}, ErrRequestTooLarge},
		"large, may write":         {TxnRequest[string]{Compare: []Compare[string]{{Key: "a", Target: CompareValue, Value: big + big}}, Success: []RequestOp[string]{rangeOp("a")}, Failure: []RequestOp[string]{delOp("b", "")}}, Limits{}, ErrRequestTooLarge},
		"shape before intervals":   {TxnRequest[string]{Success: []RequestOp[string]{putOp("a"), putOp("a"), {}}}, Limits{}, ErrKeyNotFound},
		"intervals before size":    {TxnRequest[string]{Success: []RequestOp[string]{{Put: &PutRequest[string]{Key: "a", Value: big}}, {Put: &PutRequest[string]{Key: "a", Value: big}}}}, Limits{}, ErrDuplicateKey},
	} {
		check(t, name, c.r.Check(c.limits), c.want)
	}
}

// TestLeaseGrantRules follows lease/lessor_test.go TestLessorMaxTTL.
func TestLeaseGrantRules(t *testing.T) {
	check(t, "max", CheckLeaseGrant(MaxLeaseTTL), nil)
	check(t, "above max", CheckLeaseGrant(MaxLeaseTTL+1), ErrLeaseTTLTooLarge)
	check(t, "compaction", CheckCompact(1<<40, Limits{}), nil)
	check(t, "compaction, tiny limit", CheckCompact(1<<40, Limits{MaxRequestBytes: 10}), ErrRequestTooLarge)
}

// TestSizeLimit: a put whose proposal is exactly the limit passes, one byte more fails.
func TestSizeLimit(t *testing.T) {
	for _, n := range []int{1000, DefaultMaxRequestBytes} {
		p := PutRequest[S]{Key: S("k")}
		for raftRequest(fieldRaftPut, p.body()) < n {
			p.Value = append(p.Value, 'x')
		}
		if raftRequest(fieldRaftPut, p.body()) != n {
			continue // a varint grew past n; the next size is checked by the property below
		}
		check(t, fmt.Sprintf("put of %d bytes at limit %d", n, n), p.Check(Limits{MaxRequestBytes: n}), nil)
		p.Value = append(p.Value, 'x')
		check(t, fmt.Sprintf("put of %d bytes at limit %d", n+1, n), p.Check(Limits{MaxRequestBytes: n}), ErrRequestTooLarge)
	}
}

// TestSizeIsTheProposalSize: the size the rules compute is the protobuf size of the
// InternalRaftRequest etcd would marshal, for random requests of every kind.
func TestSizeIsTheProposalSize(t *testing.T) {
	header := &pb.RequestHeader{ID: 1<<62 + 12345} // 9 bytes, as etcd's generated IDs
	rapid.Check(t, func(rt *rapid.T) {
		g := &shapeGen{t: rt}
		switch rapid.IntRange(0, 3).Draw(rt, "kind") {
		case 0:
			p := g.put("put")
			want := proto.Size(&pb.InternalRaftRequest{Header: header, Put: pbPut(&p)})
			if got := raftRequest(fieldRaftPut, p.body()); got != want {
				rt.Fatalf("put: computed %d, protobuf %d", got, want)
			}
		case 1:
			d := g.del("delete")
			want := proto.Size(&pb.InternalRaftRequest{Header: header, DeleteRange: pbDelete(&d)})
			if got := raftRequest(fieldRaftDeleteRange, d.body()); got != want {
				rt.Fatalf("delete: computed %d, protobuf %d", got, want)
			}
		case 2:
			tx := g.txn("txn", 0)
			want := proto.Size(&pb.InternalRaftRequest{Header: header, Txn: pbTxn(&tx)})
			if got := raftRequest(fieldRaftTxn, tx.body()); got != want {
				rt.Fatalf("txn: computed %d, protobuf %d", got, want)
			}
		default:
			rev := rapid.Int64Range(0, 1<<62).Draw(rt, "rev")
			want := proto.Size(&pb.InternalRaftRequest{Header: header, Compaction: &pb.CompactionRequest{Revision: rev}})
			if got := raftRequest(fieldRaftCompaction, intField(1, rev)); got != want {
				rt.Fatalf("compaction: computed %d, protobuf %d", got, want)
			}
		}
	})
}

// shapeGen draws requests with fields of every size class a varint distinguishes.
type shapeGen struct{ t *rapid.T }

func (g *shapeGen) bytes(label string) S {
	n := rapid.SampledFrom([]int{0, 1, 5, 127, 128, 300, 16383, 16384, 70000}).Draw(g.t, label)
	return make(S, n)
}

func (g *shapeGen) int(label string) int64 {
	return rapid.SampledFrom([]int64{0, 1, 127, 128, 1 << 20, 1<<62 + 3}).Draw(g.t, label)
}

func (g *shapeGen) put(label string) PutRequest[S] {
	return PutRequest[S]{Key: g.bytes(label + "Key"), Value: g.bytes(label + "Value"), Lease: g.int(label + "Lease"),
		PrevKV: rapid.Bool().Draw(g.t, label+"PrevKV"), IgnoreValue: rapid.Bool().Draw(g.t, label+"IgnoreValue"),
		IgnoreLease: rapid.Bool().Draw(g.t, label+"IgnoreLease")}
}

func (g *shapeGen) del(label string) DeleteRangeRequest[S] {
	return DeleteRangeRequest[S]{Key: g.bytes(label + "Key"), RangeEnd: g.bytes(label + "End"), PrevKV: rapid.Bool().Draw(g.t, label+"PrevKV")}
}

func (g *shapeGen) rng(label string) RangeRequest[S] {
	return RangeRequest[S]{Key: g.bytes(label + "Key"), RangeEnd: g.bytes(label + "End"), Limit: g.int(label + "Limit"),
		Revision: g.int(label + "Rev"), SortOrder: SortOrder(rapid.Int32Range(0, 2).Draw(g.t, label+"Order")),
		SortTarget: SortTarget(rapid.Int32Range(0, 4).Draw(g.t, label+"Target")), Serializable: rapid.Bool().Draw(g.t, label+"Ser"),
		KeysOnly: rapid.Bool().Draw(g.t, label+"KeysOnly"), CountOnly: rapid.Bool().Draw(g.t, label+"CountOnly"),
		MinModRevision: g.int(label + "MinMod"), MaxModRevision: g.int(label + "MaxMod"),
		MinCreateRevision: g.int(label + "MinCreate"), MaxCreateRevision: g.int(label + "MaxCreate")}
}

func (g *shapeGen) txn(label string, depth int) TxnRequest[S] {
	var t TxnRequest[S]
	for i := range rapid.IntRange(0, 3).Draw(g.t, label+"Compares") {
		l := fmt.Sprintf("%sCmp%d", label, i)
		c := Compare[S]{Result: CompareResult(rapid.Int32Range(0, 3).Draw(g.t, l+"Result")), Target: CompareTarget(rapid.Int32Range(0, 4).Draw(g.t, l+"Target")),
			Key: g.bytes(l + "Key"), RangeEnd: g.bytes(l + "End")}
		switch c.Target {
		case CompareVersion:
			c.Version = g.int(l + "Version")
		case CompareCreate:
			c.CreateRevision = g.int(l + "Create")
		case CompareMod:
			c.ModRevision = g.int(l + "Mod")
		case CompareValue:
			c.Value = g.bytes(l + "Value")
		case CompareLease:
			c.Lease = g.int(l + "Lease")
		}
		t.Compare = append(t.Compare, c)
	}
	branch := func(l string) []RequestOp[S] {
		var out []RequestOp[S]
		for i := range rapid.IntRange(0, 3).Draw(g.t, l+"N") {
			ol := fmt.Sprintf("%s%d", l, i)
			var op RequestOp[S]
			switch k := rapid.IntRange(0, 3).Draw(g.t, ol+"Kind"); {
			case k == 0:
				r := g.rng(ol)
				op.Range = &r
			case k == 1:
				p := g.put(ol)
				op.Put = &p
			case k == 2 || depth >= 2:
				d := g.del(ol)
				op.DeleteRange = &d
			default:
				n := g.txn(ol, depth+1)
				op.Txn = &n
			}
			out = append(out, op)
		}
		return out
	}
	t.Success = branch(label + "Then")
	t.Failure = branch(label + "Else")
	return t
}

func pbPut(p *PutRequest[S]) *pb.PutRequest {
	return &pb.PutRequest{Key: p.Key, Value: p.Value, Lease: p.Lease, PrevKv: p.PrevKV, IgnoreValue: p.IgnoreValue, IgnoreLease: p.IgnoreLease}
}

func pbDelete(d *DeleteRangeRequest[S]) *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: d.Key, RangeEnd: d.RangeEnd, PrevKv: d.PrevKV}
}

func pbTxn(t *TxnRequest[S]) *pb.TxnRequest {
	out := &pb.TxnRequest{Success: pbOps(t.Success), Failure: pbOps(t.Failure)}
	for _, c := range t.Compare {
		pc := &pb.Compare{Result: pb.Compare_CompareResult(c.Result), Target: pb.Compare_CompareTarget(c.Target), Key: c.Key, RangeEnd: c.RangeEnd}
		switch c.Target {
		case CompareVersion:
			pc.TargetUnion = &pb.Compare_Version{Version: c.Version}
		case CompareCreate:
			pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: c.CreateRevision}
		case CompareMod:
			pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: c.ModRevision}
		case CompareValue:
			pc.TargetUnion = &pb.Compare_Value{Value: c.Value}
		case CompareLease:
			pc.TargetUnion = &pb.Compare_Lease{Lease: c.Lease}
		}
		out.Compare = append(out.Compare, pc)
	}
	return out
}

func pbOps(ops []RequestOp[S]) []*pb.RequestOp {
	var out []*pb.RequestOp
	for _, op := range ops {
		po := &pb.RequestOp{}
		switch {
		case op.Range != nil:
			r := op.Range
			po.Request = &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: r.Key, RangeEnd: r.RangeEnd,
				Limit: r.Limit, Revision: r.Revision, SortOrder: pb.RangeRequest_SortOrder(r.SortOrder),
				SortTarget: pb.RangeRequest_SortTarget(r.SortTarget), Serializable: r.Serializable,
				KeysOnly: r.KeysOnly, CountOnly: r.CountOnly, MinModRevision: r.MinModRevision,
				MaxModRevision: r.MaxModRevision, MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision}}
		case op.Put != nil:
			po.Request = &pb.RequestOp_RequestPut{RequestPut: pbPut(op.Put)}
		case op.DeleteRange != nil:
			po.Request = &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: pbDelete(op.DeleteRange)}
		case op.Txn != nil:
			po.Request = &pb.RequestOp_RequestTxn{RequestTxn: pbTxn(op.Txn)}
		}
		out = append(out, po)
	}
	return out
}
