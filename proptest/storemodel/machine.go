package storemodel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

const (
	smLeaseCheck = 500 * time.Millisecond
	smProgress   = 2 * time.Second
	smMaxTxnOps  = 8
	// valueChunk is the size of the store's value-log chunks: values of a quarter of it and more get
	// chunks of their own, which compaction frees.
	valueChunk = 1 << 20
	// smMaxRequestBytes is far above any request the generators make (a txn holds a few dozen puts
	// at most, of 3 value chunks at most): the model has no size limit.
	smMaxRequestBytes = 1 << 30
)

// Run drives a fresh store (ManualTick, fake clock) and the model with the same random operations,
// checks every response and every watcher's delivered stream against the model, and returns how many
// responses and deliveries it checked. It is a rapid property: use it with rapid.Check, or with
// rapid.MakeFuzz to let a fuzzer's bytes choose the operations. A panic in the store fails the
// property, which rapid then shrinks.
func Run(t *rapid.T) int {
	return run(t, false)
}

// RunDriven is Run with the store running its own goroutine for its periodic work, woken by the
// fake clock, while the machine still calls Tick after each clock step: the store's periodic work
// then races with the machine's requests. A panic in that goroutine ends the test binary.
func RunDriven(t *rapid.T) int {
	return run(t, true)
}

func run(t *rapid.T, driven bool) int {
	sm := newStoreMachine(t, driven)
	defer sm.close()
	t.Repeat(rapid.StateMachineActions(sm))
	return sm.checks
}

type storeMachine struct {
	t        *rapid.T
	clock    *clocktesting.FakeClock
	s        *store.Store
	m        *model
	streams  []*smStream
	checks   int
	leaseIDs []int64
	many     bool // ManyWatchers ran
}

type smStream struct {
	ws       *store.WatchStream
	watchers map[int64]*smWatcher
	closed   bool
}

type smWatcher struct {
	id          int64
	key, end    string
	startRev    int64 // as requested
	from        int64 // first revision owed: start, or created revision + 1
	noPut       bool
	noDelete    bool
	prevKV      bool
	progress    bool
	got         []*store.Event
	checked     int      // events of got already compared with the model
	owedPos     int      // the owed events matched or skipped so far
	owed        []mevent // what the model says the watcher must receive, up to revision scanned
	scanned     int64
	lastRespRev int64 // highest event revision of the previous response
	compacted   int64
	canceled    bool
	// compactAtCreate is the compact revision when the watcher was created: it reads that revision
	// from the compacted history, where a key's earlier change at it is gone
	compactAtCreate int64
}

func newStoreMachine(t *rapid.T, driven bool) *storeMachine {
	start := time.Unix(1_700_000_000, 0)
	fc := clocktesting.NewFakeClock(start)
	s := store.New(store.Options{
		Clock: fc, ManualTick: !driven, MaxTxnOps: smMaxTxnOps, MaxRequestBytes: smMaxRequestBytes,
		LeaseCheckInterval: smLeaseCheck, ProgressNotifyInterval: smProgress,
		// a fixed jitter seed: a failure rapid finds must replay the same way when it shrinks it
		Seed: 1,
	})
	return &storeMachine{t: t, clock: fc, s: s, m: newModel(start, smLeaseCheck, smMaxTxnOps)}
}

func (sm *storeMachine) close() {
	sm.s.Close()
}

// ---- generators ----

var smKeys = []string{"a", "a/1", "a/2", "a/3", "b", "b/1", "c", "\xff"}

func genKey(t *rapid.T, label string) string { return rapid.SampledFrom(smKeys).Draw(t, label) }

// genRange draws a key and range end: a single key, a prefix, a from-key range, an explicit range
// (sometimes empty or inverted).
func genRange(t *rapid.T, label string) (string, string) {
	key := genKey(t, label+"-key")
	switch rapid.IntRange(0, 3).Draw(t, label+"-kind") {
	case 0:
		return key, ""
	case 1:
		return key, prefixEnd(key)
	case 2:
		return key, "\x00"
	default:
		return key, genKey(t, label+"-end")
	}
}

func prefixEnd(k string) string {
	b := []byte(k)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}

func (sm *storeMachine) genLease(t *rapid.T, label string) int64 {
	if len(sm.leaseIDs) == 0 || rapid.Bool().Draw(t, label+"-none") {
		return 0
	}
	return rapid.SampledFrom(sm.leaseIDs).Draw(t, label)
}

// genValue draws a value: mostly a short one, sometimes one around the store's value-log chunk size
// or several times it.
func genValue(t *rapid.T, label string) []byte {
	if rapid.IntRange(0, 30).Draw(t, label+"-big") == 0 {
		size := rapid.SampledFrom([]int{valueChunk/4 + 1, valueChunk - 1, valueChunk + 1, 3 * valueChunk}).Draw(t, label+"-size")
		fill := rapid.SampledFrom([]byte("pqr")).Draw(t, label+"-fill")
		return bytes.Repeat([]byte{fill}, size)
	}
	return []byte(rapid.SampledFrom([]string{"", "x", "y", "zz"}).Draw(t, label+"-value"))
}

func (sm *storeMachine) genPut(t *rapid.T, label string) *store.PutRequest {
	r := &store.PutRequest{Key: []byte(genKey(t, label+"-key")), Lease: sm.genLease(t, label+"-lease")}
	r.Value = genValue(t, label)
	r.PrevKV = rapid.Bool().Draw(t, label+"-prev")
	switch rapid.IntRange(0, 9).Draw(t, label+"-ignore") {
	case 0:
		r.IgnoreValue, r.Value = true, nil
	case 1:
		r.IgnoreLease, r.Lease = true, 0
	case 2:
		r.IgnoreValue = true // with a value: rejected
	}
	if rapid.IntRange(0, 40).Draw(t, label+"-emptykey") == 0 {
		r.Key = nil
	}
	return r
}

func (sm *storeMachine) genRangeReq(t *rapid.T, label string) *store.RangeRequest {
	key, end := genRange(t, label)
	r := &store.RangeRequest{Key: []byte(key), RangeEnd: []byte(end)}
	r.Revision = rapid.Int64Range(-1, sm.m.rev+1).Draw(t, label+"-rev")
	r.Limit = rapid.Int64Range(0, 3).Draw(t, label+"-limit")
	r.SortOrder = etcdrules.SortOrder(rapid.IntRange(0, 2).Draw(t, label+"-order"))
	r.SortTarget = etcdrules.SortTarget(rapid.IntRange(0, 4).Draw(t, label+"-target"))
	r.KeysOnly = rapid.IntRange(0, 3).Draw(t, label+"-keysonly") == 0
	r.CountOnly = rapid.IntRange(0, 5).Draw(t, label+"-countonly") == 0
	if rapid.IntRange(0, 3).Draw(t, label+"-filters") == 0 {
		r.MinModRevision = rapid.Int64Range(0, sm.m.rev).Draw(t, label+"-minmod")
		r.MaxCreateRevision = rapid.Int64Range(0, sm.m.rev).Draw(t, label+"-maxcreate")
	}
	return r
}

func (sm *storeMachine) genOp(t *rapid.T, label string, depth int) store.RequestOp {
	n := 3
	if depth < 2 {
		n = 4
	}
	switch rapid.IntRange(0, n-1).Draw(t, label+"-op") {
	case 0:
		return store.RequestOp{Put: sm.genPut(t, label)}
	case 1:
		key, end := genRange(t, label)
		return store.RequestOp{DeleteRange: &store.DeleteRangeRequest{Key: []byte(key), RangeEnd: []byte(end), PrevKV: rapid.Bool().Draw(t, label+"-prev")}}
	case 2:
		return store.RequestOp{Range: sm.genRangeReq(t, label)}
	default:
		return store.RequestOp{Txn: sm.genTxn(t, label+"-txn", depth+1)}
	}
}

func (sm *storeMachine) genTxn(t *rapid.T, label string, depth int) *store.TxnRequest {
	r := &store.TxnRequest{}
	for i := range rapid.IntRange(0, 2).Draw(t, label+"-ncmp") {
		key, end := genRange(t, fmt.Sprint(label, "-cmp", i))
		c := store.Compare{Key: []byte(key), RangeEnd: []byte(end),
			Result: etcdrules.CompareResult(rapid.IntRange(0, 3).Draw(t, label+"-result")),
			Target: etcdrules.CompareTarget(rapid.IntRange(0, 4).Draw(t, label+"-target"))}
		v := rapid.Int64Range(0, sm.m.rev+1).Draw(t, label+"-cmpval")
		c.Version, c.CreateRevision, c.ModRevision = v%4, v, v
		c.Value = []byte(rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, label+"-cmpvalue"))
		if len(sm.leaseIDs) > 0 {
			c.Lease = rapid.SampledFrom(append([]int64{0}, sm.leaseIDs...)).Draw(t, label+"-cmplease")
		}
		r.Compare = append(r.Compare, c)
	}
	maxOps := 3
	if rapid.IntRange(0, 30).Draw(t, label+"-many") == 0 {
		maxOps = smMaxTxnOps + 1 // sometimes too many
	}
	for i := range rapid.IntRange(0, maxOps).Draw(t, label+"-nsucc") {
		r.Success = append(r.Success, sm.genOp(t, fmt.Sprint(label, "-s", i), depth))
	}
	for i := range rapid.IntRange(0, 2).Draw(t, label+"-nfail") {
		r.Failure = append(r.Failure, sm.genOp(t, fmt.Sprint(label, "-f", i), depth))
	}
	// Now and then two ops of one branch change one key: a put and a delete from the key (which
	// checkIntervals lets through), in either order.
	if rapid.IntRange(0, 4).Draw(t, label+"-overlap") == 0 {
		k := genKey(t, label+"-okey")
		p := store.RequestOp{Put: &store.PutRequest{Key: []byte(k), Value: genValue(t, label+"-oval")}}
		d := store.RequestOp{DeleteRange: &store.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte{0}, PrevKV: rapid.Bool().Draw(t, label+"-oprev")}}
		if rapid.Bool().Draw(t, label+"-putfirst") {
			r.Success = append(r.Success, p, d)
		} else {
			r.Success = append(r.Success, d, p)
		}
	}
	return r
}

// ---- KV actions ----

// cmpOptions compare byte slices longer than 64 bytes by length and checksum: go-cmp compares
// slices element by element, which for the megabyte values the generators make is slow, and
// prints them whole.
var cmpOptions = cmp.Options{
	cmp.FilterValues(func(a, b []byte) bool { return len(a) > 64 || len(b) > 64 }, cmp.Transformer("digest", digest)),
}

func digest(b []byte) string {
	return fmt.Sprintf("%d bytes %q... crc32 %08x", len(b), b[:min(8, len(b))], crc32.ChecksumIEEE(b))
}

func (sm *storeMachine) agree(what string, got, want any, gotErr, wantErr error) {
	sm.checks++
	if !errors.Is(gotErr, wantErr) || (wantErr != nil) != (gotErr != nil) {
		sm.t.Fatalf("%s: store error %v, model error %v", what, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if diff := cmp.Diff(want, got, cmpOptions); diff != "" {
		sm.t.Fatalf("%s: store and model differ (-model +store):\n%s", what, diff)
	}
}

func (sm *storeMachine) Put(t *rapid.T) {
	r := sm.genPut(t, "put")
	got, err := sm.s.Put(r)
	want, werr := sm.m.put(r)
	sm.agree("put", got, want, err, werr)
}

func (sm *storeMachine) Delete(t *rapid.T) {
	key, end := genRange(t, "del")
	r := &store.DeleteRangeRequest{Key: []byte(key), RangeEnd: []byte(end), PrevKV: rapid.Bool().Draw(t, "prev")}
	got, err := sm.s.DeleteRange(r)
	want, werr := sm.m.deleteRange(r)
	sm.agree("delete", got, want, err, werr)
}

func (sm *storeMachine) Txn(t *rapid.T) {
	r := sm.genTxn(t, "txn", 0)
	got, err := sm.s.Txn(r)
	want, werr := sm.m.txn(r)
	if werr == nil && err == nil {
		normalizeTxnSorts(r, got, want)
	}
	sm.agree("txn", got, want, err, werr)
}

func (sm *storeMachine) Range(t *rapid.T) {
	r := sm.genRangeReq(t, "range")
	got, err := sm.s.Range(r)
	want, werr := sm.m.rangeAt(r, sm.m.cur(), sm.m.rev)
	if err == nil && werr == nil {
		normalizeSort(r, got, want)
	}
	sm.agree("range", got, want, err, werr)
}

// normalizeSort makes tie order irrelevant: etcd's sort is not stable, so when the sort target is
// not the key, results that agree on the sequence of sort values and on each key's contents match.
func normalizeSort(r *store.RangeRequest, got, want *store.RangeResponse) {
	if r.SortTarget == etcdrules.SortByKey || len(got.Kvs) != len(want.Kvs) {
		return
	}
	val := func(kv *store.KeyValue) string {
		switch r.SortTarget {
		case etcdrules.SortByVersion:
			return fmt.Sprint(kv.Version)
		case etcdrules.SortByCreate:
			return fmt.Sprint(kv.CreateRevision)
		case etcdrules.SortByMod:
			return fmt.Sprint(kv.ModRevision)
		}
		return string(kv.Value)
	}
	for i := range got.Kvs {
		if val(&got.Kvs[i]) != val(&want.Kvs[i]) {
			return // a real difference: leave it for the diff
		}
	}
	// the same sort values in the same order: compare as sets of keys within equal runs
	if r.Limit > 0 && want.More {
		// which tied keys make the cut is unspecified; compare only the sort values and counts
		for i := range got.Kvs {
			want.Kvs[i] = got.Kvs[i]
		}
		return
	}
	wants := slices.Clone(want.Kvs) // want.Kvs is rewritten below
	byKey := map[string]*store.KeyValue{}
	for i := range wants {
		byKey[string(wants[i].Key)] = &wants[i]
	}
	for i := range got.Kvs {
		if w := byKey[string(got.Kvs[i].Key)]; w != nil && val(w) == val(&got.Kvs[i]) {
			want.Kvs[i] = *w
		}
	}
}

func normalizeTxnSorts(r *store.TxnRequest, got, want *store.TxnResponse) {
	if got.Succeeded != want.Succeeded || len(got.Responses) != len(want.Responses) {
		return
	}
	ops := r.Success
	if !want.Succeeded {
		ops = r.Failure
	}
	for i, op := range ops {
		switch {
		case op.Range != nil && got.Responses[i].Range != nil && want.Responses[i].Range != nil:
			normalizeSort(op.Range, got.Responses[i].Range, want.Responses[i].Range)
		case op.Txn != nil && got.Responses[i].Txn != nil && want.Responses[i].Txn != nil:
			normalizeTxnSorts(op.Txn, got.Responses[i].Txn, want.Responses[i].Txn)
		}
	}
}

func (sm *storeMachine) Compact(t *rapid.T) {
	rev := rapid.Int64Range(sm.m.compactRev-1, sm.m.rev+1).Draw(t, "rev")
	got, err := sm.s.Compact(rev)
	want, werr := sm.m.compact(rev)
	sm.agree("compact", got, want, err, werr)
}

// ---- leases ----

func (sm *storeMachine) LeaseGrant(t *rapid.T) {
	id := int64(0)
	if rapid.Bool().Draw(t, "explicit") {
		id = rapid.Int64Range(1, 5).Draw(t, "id")
	}
	ttl := rapid.Int64Range(0, 6).Draw(t, "ttl")
	if rapid.IntRange(0, 30).Draw(t, "huge") == 0 {
		ttl = store.MaxLeaseTTL + 1
	}
	got, err := sm.s.LeaseGrant(id, ttl)
	chosen := int64(0)
	if err == nil {
		chosen = got.ID
	}
	want, werr := sm.m.grant(id, ttl, store.DefaultMinLeaseTTL, chosen)
	sm.agree("lease grant", got, want, err, werr)
	if err == nil {
		sm.leaseIDs = append(sm.leaseIDs, got.ID)
	}
}

func (sm *storeMachine) LeaseRevoke(t *rapid.T) {
	id := sm.genLease(t, "id")
	got, err := sm.s.LeaseRevoke(id)
	want, werr := sm.m.revoke(id)
	sm.agree("lease revoke", got, want, err, werr)
}

func (sm *storeMachine) LeaseKeepAlive(t *rapid.T) {
	id := sm.genLease(t, "id")
	if l := sm.m.leases[id]; l == nil || l.expiry.After(sm.m.now) {
		got, err := sm.s.LeaseKeepAlive(context.Background(), id)
		want, werr := sm.m.keepAlive(id)
		sm.agree("lease keepalive", got, want, err, werr)
		return
	}
	// Expired but not revoked yet: the keepalive waits for the next lease check to revoke it.
	if _, err := sm.s.LeaseKeepAlive(deadContext(), id); !errors.Is(err, context.Canceled) {
		t.Fatalf("keepalive of expired lease %d, whose keys still exist, answered %v; want it to wait", id, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sm.s.LeaseKeepAlive(context.Background(), id)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("keepalive of expired lease %d answered %v before its revocation", id, err)
	default:
	}
	sm.advance(max(0, sm.m.nextLease.Sub(sm.m.now)))
	select {
	case err := <-done:
		_, werr := sm.m.keepAlive(id)
		sm.agree("lease keepalive after expiry", nil, nil, err, werr)
		if sm.m.leases[id] != nil {
			t.Fatalf("model: lease %d still there after its lease check", id)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatalf("keepalive of lease %d still waiting after the lease check revoked it", id)
	}
}

// AdvanceToExpiry moves the clock to just past the expiry of a live lease, where a keepalive must
// wait for the revocation and a time-to-live reports the lease with no time left.
func (sm *storeMachine) AdvanceToExpiry(t *rapid.T) {
	var live []int64
	for id, l := range sm.m.leases {
		if l.expiry.After(sm.m.now) {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		t.Skip("no live lease")
	}
	sortInt64s(live)
	id := rapid.SampledFrom(live).Draw(t, "lease")
	past := time.Duration(rapid.IntRange(0, 999).Draw(t, "past-ms")) * time.Millisecond
	sm.advance(sm.m.leases[id].expiry.Sub(sm.m.now) + past)
}

func (sm *storeMachine) LeaseTimeToLive(t *rapid.T) {
	id := sm.genLease(t, "id")
	got, err := sm.s.LeaseTimeToLive(id, true)
	want, werr := sm.m.timeToLive(id)
	sm.agree("lease ttl", got, want, err, werr)
}

// Burst writes more revisions into one watched range than a stream channel holds, so that watchers
// become victims and are caught up through history.
func (sm *storeMachine) Burst(t *rapid.T) {
	key := genKey(t, "key")
	for i := range rapid.IntRange(100, 300).Draw(t, "n") {
		r := &store.PutRequest{Key: []byte(key), Value: []byte(fmt.Sprint(i))}
		got, err := sm.s.Put(r)
		want, werr := sm.m.put(r)
		sm.agree("burst put", got, want, err, werr)
	}
}

// OverlapThenCompact runs a txn that changes one key twice, a put (sometimes of a value of its own
// value-log chunk) and a delete from the key in either order, compacts at its revision and watches
// from there: the watch reads the compacted history, which holds the key's last change alone.
func (sm *storeMachine) OverlapThenCompact(t *rapid.T) {
	k := genKey(t, "key")
	p := store.RequestOp{Put: &store.PutRequest{Key: []byte(k), Value: genValue(t, "value")}}
	d := store.RequestOp{DeleteRange: &store.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte{0}}}
	r := &store.TxnRequest{Success: []store.RequestOp{p, d}}
	if rapid.Bool().Draw(t, "delete-first") {
		r.Success = []store.RequestOp{d, p}
	}
	got, err := sm.s.Txn(r)
	want, werr := sm.m.txn(r)
	sm.agree("overlapping txn", got, want, err, werr)
	rev := sm.m.rev
	if rev <= sm.m.compactRev {
		return
	}
	cgot, err := sm.s.Compact(rev)
	cwant, werr := sm.m.compact(rev)
	sm.agree("compact at the overlapping txn", cgot, cwant, err, werr)
	open := 0
	for _, st := range sm.streams {
		if !st.closed {
			open++
		}
	}
	if open == 0 {
		if len(sm.streams) >= 3 {
			return
		}
		sm.OpenStream(t)
	}
	st := sm.pickStream(t)
	req := &store.WatchRequest{Key: []byte(k), RangeEnd: []byte{0}, StartRevision: rev, PrevKV: rapid.Bool().Draw(t, "prev")}
	sm.createWatch(st, req, &smWatcher{key: k, end: "\x00", startRev: rev, prevKV: req.PrevKV})
}

// BurstThenCompact writes past a stream channel's capacity and compacts at once, before anything is
// read: watchers left behind by the burst meet the compaction while they are victims or unsynced.
func (sm *storeMachine) BurstThenCompact(t *rapid.T) {
	sm.Burst(t)
	rev := rapid.Int64Range(sm.m.compactRev+1, sm.m.rev).Draw(t, "compact")
	got, err := sm.s.Compact(rev)
	want, werr := sm.m.compact(rev)
	sm.agree("compact after burst", got, want, err, werr)
}

// AdvanceClock moves time on and runs the store's periodic work: lease expiry, catch-up, victims,
// progress notifications.
func (sm *storeMachine) AdvanceClock(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 30).Draw(t, "tenths")) * 100 * time.Millisecond
	sm.advance(d)
}

func (sm *storeMachine) advance(d time.Duration) {
	sm.clock.Step(d)
	sm.m.now = sm.m.now.Add(d)
	sm.s.Tick()
	sm.m.tick(smLeaseCheck)
}

// ---- watches ----

func (sm *storeMachine) OpenStream(t *rapid.T) {
	if len(sm.streams) >= 3 {
		t.Skip("enough streams")
	}
	ws, err := sm.s.NewWatchStream()
	if err != nil {
		t.Fatal(err)
	}
	sm.streams = append(sm.streams, &smStream{ws: ws, watchers: map[int64]*smWatcher{}})
}

func (sm *storeMachine) pickStream(t *rapid.T) *smStream {
	var open []*smStream
	for _, st := range sm.streams {
		if !st.closed {
			open = append(open, st)
		}
	}
	if len(open) == 0 {
		t.Skip("no open stream")
	}
	return rapid.SampledFrom(open).Draw(t, "stream")
}

// makeRoom reads responses until the stream can take one more: Watch and Cancel wait for room.
//
// The channel holds 128 event, progress and compaction responses and 16 created and canceled
// answers more, so only a channel holding 144 responses makes a create or a cancel wait: below
// that, Watch and Cancel must answer at once whatever their context, even when 128 events fill
// the channel (deadContext checks it).
func (sm *storeMachine) makeRoom(st *smStream) {
	for len(st.ws.Chan()) >= streamRoom {
		sm.handle(st, <-st.ws.Chan())
	}
}

// streamRoom is how many responses a stream's channel holds, control answers included.
const streamRoom = 128 + 16

// deadContext is an already canceled context: a call given it must not wait.
func deadContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func (sm *storeMachine) Watch(t *rapid.T) {
	st := sm.pickStream(t)
	key, end := genRange(t, "watch")
	req := &store.WatchRequest{
		Key: []byte(key), RangeEnd: []byte(end),
		StartRevision:  rapid.Int64Range(-1, sm.m.rev+2).Draw(t, "start"),
		PrevKV:         rapid.Bool().Draw(t, "prev"),
		ProgressNotify: rapid.Bool().Draw(t, "progress"),
	}
	if rapid.IntRange(0, 3).Draw(t, "start-zero") == 0 {
		req.StartRevision = 0
	}
	w := &smWatcher{key: key, end: end, startRev: req.StartRevision, prevKV: req.PrevKV, progress: req.ProgressNotify}
	switch rapid.IntRange(0, 5).Draw(t, "filter") {
	case 0:
		req.Filters, w.noPut = []etcdrules.WatchFilter{etcdrules.FilterNoPut}, true
	case 1:
		req.Filters, w.noDelete = []etcdrules.WatchFilter{etcdrules.FilterNoDelete}, true
	}
	sm.createWatch(st, req, w)
}

// createWatch creates the watcher w describes and reads the stream up to its created answer.
func (sm *storeMachine) createWatch(st *smStream, req *store.WatchRequest, w *smWatcher) {
	t := sm.t
	if w.key == "" {
		w.key = "\x00"
	}
	// Only a stream whose channel is full to the last slot makes a create wait: read until one
	// slot is free. A channel full of events alone still takes the created answer at once.
	sm.makeRoom(st)
	rev := sm.m.rev
	queued := len(st.ws.Chan())
	id, err := st.ws.Watch(deadContext(), req)
	if errors.Is(err, context.Canceled) {
		t.Fatalf("watch %+v waited with %d responses queued", req, queued)
	}
	var wantErr error
	switch {
	case req.StartRevision < 0:
		wantErr = store.ErrCompacted
	case w.end != "" && w.end != "\x00" && w.key >= w.end:
		wantErr = store.ErrEmptyWatcherRange
	}
	if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
		t.Fatalf("watch %+v: error %v, want %v", req, err, wantErr)
	}
	// the created answer is queued now: read it in order with everything else
	sm.drainStream(st)
	if wantErr != nil {
		return
	}
	w.id = id
	w.from = req.StartRevision
	if w.from == 0 {
		w.from = rev + 1
	}
	w.compactAtCreate = sm.m.compactRev
	if st.watchers[id] != nil {
		t.Fatalf("watch ID %d reused while in use", id)
	}
	st.watchers[id] = w
	sm.checks++
}

// ManyWatchers creates more watchers from a past revision than one catch-up pass takes (512), once
// per run and rarely, so that some stay unsynced across passes.
func (sm *storeMachine) ManyWatchers(t *rapid.T) {
	if sm.many || rapid.IntRange(0, 9).Draw(t, "rare") != 0 {
		t.Skip("rare")
	}
	sm.many = true
	st := sm.pickStream(t)
	key, end := genRange(t, "many")
	start := rapid.Int64Range(max(1, sm.m.compactRev), sm.m.rev).Draw(t, "start")
	for range rapid.IntRange(513, 530).Draw(t, "n") {
		req := &store.WatchRequest{Key: []byte(key), RangeEnd: []byte(end), StartRevision: start}
		sm.createWatch(st, req, &smWatcher{key: key, end: end, startRev: start})
	}
}

func (sm *storeMachine) Cancel(t *rapid.T) {
	st := sm.pickStream(t)
	var live []int64
	for id, w := range st.watchers {
		if !w.canceled {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		t.Skip("nothing to cancel")
	}
	sortInt64s(live)
	id := rapid.SampledFrom(live).Draw(t, "id")
	sm.makeRoom(st)
	if err := st.ws.Cancel(deadContext(), id); err != nil {
		t.Fatalf("cancel %d with %d responses queued: %v", id, len(st.ws.Chan()), err)
	}
	sm.drainStream(st)
	if !st.watchers[id].canceled {
		t.Fatalf("no canceled answer for %d", id)
	}
}

func (sm *storeMachine) RequestProgress(t *rapid.T) {
	st := sm.pickStream(t)
	sm.drainStream(st)
	st.ws.RequestProgress()
	sm.drainStream(st)
}

func (sm *storeMachine) CloseStream(t *rapid.T) {
	st := sm.pickStream(t)
	st.ws.Close()
	for range st.ws.Chan() {
	}
	st.closed = true
}

// DrainAll reads everything and runs sync passes until every watcher is caught up, then checks
// each watcher's whole stream against the model.
func (sm *storeMachine) DrainAll(t *rapid.T) {
	for pass := 0; ; pass++ {
		for _, st := range sm.streams {
			if !st.closed {
				sm.drainStream(st)
			}
		}
		if sm.caughtUp() {
			break
		}
		if pass > 100 {
			t.Fatalf("watchers not caught up after %d sync passes", pass)
		}
		sm.advance(store.DefaultSyncInterval)
	}
	for _, st := range sm.streams {
		if st.closed {
			continue
		}
		for _, w := range st.watchers {
			sm.checkComplete(w)
		}
	}
}

func (sm *storeMachine) caughtUp() bool {
	for _, st := range sm.streams {
		if st.closed {
			continue
		}
		for _, w := range st.watchers {
			if w.canceled || w.compacted != 0 {
				continue
			}
			if !sm.onlyDroppableLeft(w, sm.m.rev) {
				return false
			}
		}
	}
	return true
}

// onlyDroppableLeft reports whether every owed event up to rev that w has not received is one a
// compaction may have dropped.
func (sm *storeMachine) onlyDroppableLeft(w *smWatcher, rev int64) bool {
	want := sm.m.owed(w)
	for _, ev := range want[w.owedPos:] {
		if ev.kv.mod > rev {
			break
		}
		if !sm.m.droppable(ev) {
			return false
		}
	}
	return true
}

func (sm *storeMachine) drainStream(st *smStream) {
	for {
		select {
		case r, ok := <-st.ws.Chan():
			if !ok {
				return
			}
			sm.handle(st, r)
		default:
			return
		}
	}
}

// handle checks one response against what the model says the stream may send at this point.
func (sm *storeMachine) handle(st *smStream, r store.WatchResponse) {
	t := sm.t
	sm.checks++
	switch {
	case r.Created:
		if r.Revision != sm.m.rev && !r.Canceled {
			// created answers are read right after the Watch call returns
			t.Fatalf("created answer at revision %d, store is at %d", r.Revision, sm.m.rev)
		}
		return
	case r.WatchID == store.InvalidWatchID:
		if !r.IsProgressNotify() || r.Revision > sm.m.rev {
			t.Fatalf("stream-wide response %+v", r)
		}
		for _, w := range st.watchers {
			if !w.canceled && w.compacted == 0 {
				sm.checkBookmark(w, r.Revision)
			}
		}
		return
	}
	w := st.watchers[r.WatchID]
	if w == nil {
		t.Fatalf("response for unknown watch %d: %+v", r.WatchID, r)
	}
	// after a compaction answer only the answer to an explicit Cancel may follow, as in etcd
	if w.canceled || (w.compacted != 0 && !(r.Canceled && r.CompactRevision == 0 && len(r.Events) == 0)) {
		t.Fatalf("response after the final answer of watch %d: %+v", r.WatchID, r)
	}
	switch {
	case r.CompactRevision != 0:
		// the watcher had not got past revision pos: a compaction above it cancels the watch
		pos := max(w.from, w.lastRespRev+1)
		if !r.Canceled || r.Revision != 0 || pos >= r.CompactRevision || !containsInt64(sm.m.compacts, r.CompactRevision) {
			t.Fatalf("compaction answer %+v for watch %d at revision %d", r, w.id, pos)
		}
		w.compacted = r.CompactRevision
	case r.Canceled:
		w.canceled = true
	case len(r.Events) == 0:
		if !w.progress || r.Revision > sm.m.rev {
			t.Fatalf("progress notification %+v for watch %d (progress_notify %v)", r, w.id, w.progress)
		}
		sm.checkBookmark(w, r.Revision)
	default:
		first, last := r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision
		if first <= w.lastRespRev {
			t.Fatalf("watch %d: response starts at revision %d, previous ended at %d: a revision was split or repeated", w.id, first, w.lastRespRev)
		}
		revs := 1
		for i := 1; i < len(r.Events); i++ {
			if r.Events[i].Kv.ModRevision != r.Events[i-1].Kv.ModRevision {
				revs++
			}
		}
		if revs > 1000 {
			t.Fatalf("watch %d: one response holds %d revisions", w.id, revs)
		}
		if r.Revision < last {
			t.Fatalf("watch %d: header revision %d below its last event %d", w.id, r.Revision, last)
		}
		w.lastRespRev = last
		w.got = append(w.got, r.Events...)
		sm.checkPrefix(w)
	}
}

// checkBookmark: a progress notification at rev promises every owed event up to rev was sent, and
// none above it.
func (sm *storeMachine) checkBookmark(w *smWatcher, rev int64) {
	if n := len(w.got); n > 0 && w.got[n-1].Kv.ModRevision > rev {
		sm.t.Fatalf("watch %d: progress at revision %d after an event at %d", w.id, rev, w.got[n-1].Kv.ModRevision)
	}
	if !sm.onlyDroppableLeft(w, rev) {
		sm.t.Fatalf("watch %d: progress at revision %d before all the events up to it (%d received)", w.id, rev, len(w.got))
	}
}

// checkPrefix compares the events w received with those the model owes it, in order, passing over
// owed events a compaction may have dropped where the store did drop them.
func (sm *storeMachine) checkPrefix(w *smWatcher) {
	want := sm.m.owed(w)
	for ; w.checked < len(w.got); w.checked++ {
		got := w.got[w.checked]
		for w.owedPos < len(want) && sm.m.droppable(want[w.owedPos]) &&
			(!sameChange(got, want[w.owedPos]) || want[w.owedPos].kv.mod <= w.compactAtCreate) {
			w.owedPos++
		}
		if w.owedPos >= len(want) {
			sm.t.Fatalf("watch %d: %d events delivered, the model owes %d", w.id, len(w.got), len(want))
		}
		sm.checkEvent(w, w.checked, got, want[w.owedPos])
		w.owedPos++
	}
}

// sameChange reports whether got is the model's change ev: the same key, type and revision.
func sameChange(got *store.Event, ev mevent) bool {
	return string(got.Kv.Key) == ev.key && (got.Type == etcdrules.EventDelete) == ev.del && got.Kv.ModRevision == ev.kv.mod
}

func (sm *storeMachine) checkComplete(w *smWatcher) {
	if w.canceled || w.compacted != 0 {
		return
	}
	if !sm.onlyDroppableLeft(w, sm.m.rev) {
		sm.t.Fatalf("watch %d [%q,%q) from %d: got %d events, the model owes more", w.id, w.key, w.end, w.from, len(w.got))
	}
}

func (sm *storeMachine) checkEvent(w *smWatcher, i int, got *store.Event, want mevent) {
	exp := &store.Event{Type: etcdrules.EventPut, Kv: *toKV(want.key, want.kv)}
	if want.del {
		exp.Type = etcdrules.EventDelete
		exp.Kv = store.KeyValue{Key: []byte(want.key), ModRevision: want.kv.mod}
	}
	isCreate := !want.del && want.kv.create == want.kv.mod
	// prev_kv is the key at the revision before the event (v3rpc sendLoop reads it then), which
	// for the second change of a key within one txn is not the first change
	if prev := sm.m.snapAt(want.kv.mod-1, want.key); w.prevKV && !isCreate && prev != nil {
		switch {
		case got.PrevKV != nil:
			exp.PrevKV = toKV(want.key, *prev)
		case want.kv.mod-1 < sm.m.compactRev:
			// prev_kv is read when the response is sent; it is silently missing once compacted
		default:
			sm.t.Fatalf("watch %d event %d: prev_kv missing though revision %d is not compacted", w.id, i, want.kv.mod-1)
		}
	}
	if sameEvent(exp, got) {
		return
	}
	if diff := cmp.Diff(exp, got, cmpOptions); diff != "" {
		sm.t.Fatalf("watch %d [%q,%q) from %d, event %d (-model +store):\n%s", w.id, w.key, w.end, w.from, i, diff)
	}
}

// sameEvent is cmp.Equal for events, without its cost: every delivered event is compared.
func sameEvent(a, b *store.Event) bool {
	return a.Type == b.Type && sameKV(&a.Kv, &b.Kv) && sameKV(a.PrevKV, b.PrevKV)
}

func sameKV(a, b *store.KeyValue) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CreateRevision == b.CreateRevision && a.ModRevision == b.ModRevision && a.Version == b.Version &&
		a.Lease == b.Lease && sameBytes(a.Key, b.Key) && sameBytes(a.Value, b.Value)
}

// sameBytes tells nil from empty, as cmp does.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// snapAt returns the key's value at rev, as the model's snapshot has it.
func (m *model) snapAt(rev int64, key string) *mkv {
	v, ok := m.snaps[rev][key]
	if !ok {
		return nil
	}
	return &v
}

func containsInt64(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func sortInt64s(xs []int64) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

// Check runs after every action: the store's revisions agree with the model's.
func (sm *storeMachine) Check(t *rapid.T) {
	if got := sm.s.Rev(); got != sm.m.rev {
		t.Fatalf("store revision %d, model %d", got, sm.m.rev)
	}
	if got := sm.s.CompactRevision(); got != sm.m.compactRev {
		t.Fatalf("compact revision %d, model %d", got, sm.m.compactRev)
	}
}
