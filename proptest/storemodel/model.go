package storemodel

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
)

// model is a deliberately naive reference for store.Store: a full copy of the key space for every
// revision, the events of every revision, and leases as a plain map. It shares no code with the store.
type model struct {
	rev        int64
	compactRev int64
	compacts   []int64          // every successful compaction, in order
	snaps      []map[string]mkv // snaps[r] is the key space after revision r (snaps[0] unused)
	events     map[int64][]mevent
	leases     map[int64]*mlease
	now        time.Time
	nextLease  time.Time
	maxTxnOps  int
}

type mkv struct {
	value  string
	create int64
	mod    int64
	ver    int64
	lease  int64
}

type mevent struct {
	del  bool
	key  string
	kv   mkv // the new key-value of a PUT; mod only for a DELETE
	prev *mkv
	sub  int // position among the revision's events
}

type mlease struct {
	id     int64
	ttl    int64
	expiry time.Time
	keys   map[string]bool
}

func newModel(now time.Time, leaseCheck time.Duration, maxTxnOps int) *model {
	return &model{
		rev:        1,
		compactRev: -1,
		snaps:      []map[string]mkv{nil, {}},
		events:     map[int64][]mevent{},
		leases:     map[int64]*mlease{},
		now:        now,
		nextLease:  now.Add(leaseCheck),
		maxTxnOps:  maxTxnOps,
	}
}

func (m *model) cur() map[string]mkv { return m.snaps[m.rev] }

// mtxn is a write in progress: a private copy of the key space and the events so far.
type mtxn struct {
	m     *model
	state map[string]mkv
	evs   []mevent
}

func (m *model) begin() *mtxn {
	st := make(map[string]mkv, len(m.cur()))
	for k, v := range m.cur() {
		st[k] = v
	}
	return &mtxn{m: m, state: st}
}

func (tx *mtxn) next() int64 { return tx.m.rev + 1 }

// commit makes the txn a revision if it changed something.
func (tx *mtxn) commit() {
	if len(tx.evs) == 0 {
		return
	}
	m := tx.m
	m.rev++
	m.snaps = append(m.snaps, tx.state)
	m.events[m.rev] = tx.evs
	for _, ev := range tx.evs {
		if ev.prev != nil && ev.prev.lease != 0 {
			if l := m.leases[ev.prev.lease]; l != nil {
				delete(l.keys, ev.key)
			}
		}
		if !ev.del && ev.kv.lease != 0 {
			m.leases[ev.kv.lease].keys[ev.key] = true
		}
	}
}

func (tx *mtxn) put(key, value string, lease int64, ignoreValue, ignoreLease bool) {
	rev := tx.next()
	old, ok := tx.state[key]
	kv := mkv{value: value, create: rev, mod: rev, ver: 1, lease: lease}
	if ok {
		kv.create, kv.ver = old.create, old.ver+1
	}
	if ignoreValue {
		kv.value = old.value
	}
	if ignoreLease {
		kv.lease = old.lease
	}
	var prev *mkv
	if ok {
		o := old
		prev = &o
	}
	tx.state[key] = kv
	tx.evs = append(tx.evs, mevent{key: key, kv: kv, prev: prev, sub: len(tx.evs)})
}

func (tx *mtxn) deleteRange(key, end string) (deleted []string, prevs []mkv) {
	for _, k := range sortedKeys(tx.state) {
		if inRange(k, key, end) {
			old := tx.state[k]
			delete(tx.state, k)
			o := old
			tx.evs = append(tx.evs, mevent{del: true, key: k, kv: mkv{mod: tx.next()}, prev: &o, sub: len(tx.evs)})
			deleted = append(deleted, k)
			prevs = append(prevs, old)
		}
	}
	return deleted, prevs
}

func sortedKeys(m map[string]mkv) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// inRange is etcd's key / range_end convention, written out independently of the store.
func inRange(k, key, end string) bool {
	switch {
	case end == "":
		return k == key
	case end == "\x00":
		return k >= key
	default:
		return k >= key && k < end
	}
}

func toKV(key string, v mkv) *store.KeyValue {
	kv := &store.KeyValue{Key: []byte(key), CreateRevision: v.create, ModRevision: v.mod, Version: v.ver, Lease: v.lease}
	if v.value != "" {
		kv.Value = []byte(v.value)
	}
	return kv
}

// ---- requests ----

func (m *model) put(r *store.PutRequest) (*store.PutResponse, error) {
	switch {
	case len(r.Key) == 0:
		return nil, store.ErrEmptyKey
	case r.IgnoreValue && len(r.Value) != 0:
		return nil, store.ErrValueProvided
	case r.IgnoreLease && r.Lease != 0:
		return nil, store.ErrLeaseProvided
	case r.Lease != 0 && m.leases[r.Lease] == nil:
		return nil, store.ErrLeaseNotFound
	}
	old, exists := m.cur()[string(r.Key)]
	if (r.IgnoreValue || r.IgnoreLease) && !exists {
		return nil, store.ErrKeyNotFound
	}
	tx := m.begin()
	tx.put(string(r.Key), string(r.Value), r.Lease, r.IgnoreValue, r.IgnoreLease)
	tx.commit()
	resp := &store.PutResponse{Header: store.Header{Revision: m.rev}}
	if r.PrevKV && exists {
		resp.PrevKV = toKV(string(r.Key), old)
	}
	return resp, nil
}

func (m *model) deleteRange(r *store.DeleteRangeRequest) (*store.DeleteRangeResponse, error) {
	if len(r.Key) == 0 {
		return nil, store.ErrEmptyKey
	}
	tx := m.begin()
	deleted, prevs := tx.deleteRange(string(r.Key), string(r.RangeEnd))
	tx.commit()
	resp := &store.DeleteRangeResponse{Header: store.Header{Revision: m.rev}, Deleted: int64(len(deleted))}
	if r.PrevKV {
		for i, k := range deleted {
			resp.PrevKVs = append(resp.PrevKVs, *toKV(k, prevs[i]))
		}
	}
	return resp, nil
}

// rangeAt answers a range read as of revision rev of a txn that sees state (its own writes
// included) and whose current revision is cur.
func (m *model) rangeAt(r *store.RangeRequest, state map[string]mkv, cur int64) (*store.RangeResponse, error) {
	switch {
	case len(r.Key) == 0:
		return nil, store.ErrEmptyKey
	case r.SortOrder < 0 || r.SortOrder > 2 || r.SortTarget < 0 || r.SortTarget > 4:
		return nil, store.ErrInvalidSortOption
	}
	rev := r.Revision
	if rev > cur {
		return nil, store.ErrFutureRev
	}
	if rev > 0 && rev < m.compactRev {
		return nil, store.ErrCompacted
	}
	if rev > 0 && rev != cur {
		state = m.snaps[rev]
	}
	var kvs []*store.KeyValue
	for _, k := range sortedKeys(state) {
		if inRange(k, string(r.Key), string(r.RangeEnd)) {
			kvs = append(kvs, toKV(k, state[k]))
		}
	}
	resp := &store.RangeResponse{Header: store.Header{Revision: cur}, Count: int64(len(kvs))}
	if r.CountOnly {
		return resp, nil
	}
	// etcd quirk (txn/range.go rangeLimit): with sort order NONE and no revision filters the limit
	// is applied in key order before sorting, even when a non-key target then sorts the result
	hasFilters := r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
	defaultOrder := r.SortOrder == etcdrules.SortNone || (r.SortTarget == etcdrules.SortByKey && r.SortOrder == etcdrules.SortAscend)
	if r.Limit > 0 && defaultOrder && !hasFilters && int64(len(kvs)) > r.Limit+1 {
		kvs = kvs[:r.Limit+1]
	}
	var kept []*store.KeyValue
	for _, kv := range kvs {
		if (r.MinModRevision == 0 || kv.ModRevision >= r.MinModRevision) &&
			(r.MaxModRevision == 0 || kv.ModRevision <= r.MaxModRevision) &&
			(r.MinCreateRevision == 0 || kv.CreateRevision >= r.MinCreateRevision) &&
			(r.MaxCreateRevision == 0 || kv.CreateRevision <= r.MaxCreateRevision) {
			kept = append(kept, kv)
		}
	}
	order := r.SortOrder
	if r.SortTarget != etcdrules.SortByKey && order == etcdrules.SortNone {
		order = etcdrules.SortAscend
	}
	if order != etcdrules.SortNone {
		less := map[etcdrules.SortTarget]func(a, b *store.KeyValue) bool{
			etcdrules.SortByKey:     func(a, b *store.KeyValue) bool { return bytes.Compare(a.Key, b.Key) < 0 },
			etcdrules.SortByVersion: func(a, b *store.KeyValue) bool { return a.Version < b.Version },
			etcdrules.SortByCreate:  func(a, b *store.KeyValue) bool { return a.CreateRevision < b.CreateRevision },
			etcdrules.SortByMod:     func(a, b *store.KeyValue) bool { return a.ModRevision < b.ModRevision },
			etcdrules.SortByValue:   func(a, b *store.KeyValue) bool { return bytes.Compare(a.Value, b.Value) < 0 },
		}[r.SortTarget]
		if order == etcdrules.SortDescend {
			asc := less
			less = func(a, b *store.KeyValue) bool { return asc(b, a) }
		}
		sort.SliceStable(kept, func(i, j int) bool { return less(kept[i], kept[j]) })
	}
	if r.Limit > 0 && int64(len(kept)) > r.Limit {
		kept = kept[:r.Limit]
		resp.More = true
	}
	for _, kv := range kept {
		if r.KeysOnly {
			kv.Value = nil
			if r.SortTarget != etcdrules.SortByValue {
				kv.Lease = 0
			}
		}
	}
	for _, kv := range kept {
		resp.Kvs = append(resp.Kvs, *kv)
	}
	return resp, nil
}

func (m *model) compact(rev int64) (*store.CompactResponse, error) {
	switch {
	case rev <= m.compactRev:
		return nil, store.ErrCompacted
	case rev > m.rev:
		return nil, store.ErrFutureRev
	}
	m.compactRev = rev
	m.compacts = append(m.compacts, rev)
	return &store.CompactResponse{Header: store.Header{Revision: m.rev}}, nil
}

// ---- txn ----

func (m *model) txn(r *store.TxnRequest) (*store.TxnResponse, error) {
	if err := m.checkTxnShape(r, m.maxTxnOps); err != nil {
		return nil, err
	}
	for _, branch := range [][]store.RequestOp{r.Success, r.Failure} {
		if _, _, err := dupCheck(branch); err != nil {
			return nil, err
		}
	}
	start := m.cur()
	tx := m.begin()
	var deleted []string // keys deleted so far in execution order, for ignore_* checks
	if err := m.checkBranch(r, start, &deleted); err != nil {
		return nil, err
	}
	resp := &store.TxnResponse{}
	m.execTxn(tx, r, start, resp)
	tx.commit()
	resp.Header.Revision = m.rev
	return resp, nil
}

func (m *model) checkTxnShape(r *store.TxnRequest, budget int) error {
	n := max(len(r.Compare), len(r.Success), len(r.Failure))
	if n > budget {
		return store.ErrTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return store.ErrEmptyKey
		}
	}
	for _, ops := range [][]store.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch {
			case op.Range != nil:
				if len(op.Range.Key) == 0 {
					err = store.ErrEmptyKey
				} else if op.Range.SortOrder < 0 || op.Range.SortOrder > 2 || op.Range.SortTarget < 0 || op.Range.SortTarget > 4 {
					err = store.ErrInvalidSortOption
				}
			case op.Put != nil:
				switch {
				case len(op.Put.Key) == 0:
					err = store.ErrEmptyKey
				case op.Put.IgnoreValue && len(op.Put.Value) != 0:
					err = store.ErrValueProvided
				case op.Put.IgnoreLease && op.Put.Lease != 0:
					err = store.ErrLeaseProvided
				}
			case op.DeleteRange != nil:
				if len(op.DeleteRange.Key) == 0 {
					err = store.ErrEmptyKey
				}
			case op.Txn != nil:
				err = m.checkTxnShape(op.Txn, budget-n)
			default:
				err = store.ErrKeyNotFound
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// span is a half-open interval in etcd's affine string order, where "" is +infinity.
type span struct{ lo, hi string }

func (s span) hits(k string) bool {
	return k >= s.lo && (s.hi == "" || k < s.hi)
}

// dupCheck is v3rpc checkIntervals written plainly: it returns the branch's puts and delete spans.
func dupCheck(ops []store.RequestOp) (map[string]bool, []span, error) {
	var dels []span
	for _, op := range ops {
		if d := op.DeleteRange; d != nil {
			if len(d.RangeEnd) > 0 {
				dels = append(dels, span{string(d.Key), string(d.RangeEnd)})
			} else {
				dels = append(dels, span{string(d.Key), string(d.Key) + "\x00"})
			}
		}
	}
	hit := func(k string) bool {
		for _, s := range dels {
			if s.hits(k) {
				return true
			}
		}
		return false
	}
	puts := map[string]bool{}
	for _, op := range ops {
		if op.Txn == nil {
			continue
		}
		thenPuts, thenDels, err := dupCheck(op.Txn.Success)
		if err != nil {
			return nil, nil, err
		}
		elsePuts, elseDels, err := dupCheck(op.Txn.Failure)
		if err != nil {
			return nil, nil, err
		}
		for k := range thenPuts {
			if puts[k] || hit(k) {
				return nil, nil, store.ErrDuplicateKey
			}
			puts[k] = true
		}
		for k := range elsePuts {
			if (puts[k] && !thenPuts[k]) || hit(k) {
				return nil, nil, store.ErrDuplicateKey
			}
			puts[k] = true
		}
		dels = append(dels, thenDels...)
		dels = append(dels, elseDels...)
	}
	for _, op := range ops {
		if op.Put != nil {
			k := string(op.Put.Key)
			if puts[k] || hit(k) {
				return nil, nil, store.ErrDuplicateKey
			}
			puts[k] = true
		}
	}
	return puts, dels, nil
}

func (m *model) compares(cs []store.Compare, state map[string]mkv) bool {
	for _, c := range cs {
		var matched []mkv
		for _, k := range sortedKeys(state) {
			if inRange(k, string(c.Key), string(c.RangeEnd)) {
				matched = append(matched, state[k])
			}
		}
		if len(matched) == 0 {
			if c.Target == etcdrules.CompareValue {
				return false
			}
			matched = []mkv{{}}
		}
		for _, kv := range matched {
			var res int
			switch c.Target {
			case etcdrules.CompareValue:
				res = strings.Compare(kv.value, string(c.Value))
			case etcdrules.CompareVersion:
				res = cmp3(kv.ver, c.Version)
			case etcdrules.CompareCreate:
				res = cmp3(kv.create, c.CreateRevision)
			case etcdrules.CompareMod:
				res = cmp3(kv.mod, c.ModRevision)
			case etcdrules.CompareLease:
				res = cmp3(kv.lease, c.Lease)
			}
			ok := map[etcdrules.CompareResult]bool{
				etcdrules.CompareEqual: res == 0, etcdrules.CompareNotEqual: res != 0,
				etcdrules.CompareGreater: res > 0, etcdrules.CompareLess: res < 0,
			}[c.Result]
			if !ok {
				return false
			}
		}
	}
	return true
}

func cmp3(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkBranch checks the chosen branches against the start state before anything is applied.
func (m *model) checkBranch(r *store.TxnRequest, start map[string]mkv, deleted *[]string) error {
	ops := r.Success
	if !m.compares(r.Compare, start) {
		ops = r.Failure
	}
	for _, op := range ops {
		switch {
		case op.Range != nil:
			// txn/txn.go checkRange: any revision but 0 below the compact revision fails, a negative
			// one included (a plain Range treats a negative revision as the current one)
			if rv := op.Range.Revision; rv > m.rev {
				return store.ErrFutureRev
			} else if rv != 0 && rv < m.compactRev {
				return store.ErrCompacted
			}
		case op.Put != nil:
			p := op.Put
			if p.Lease != 0 && m.leases[p.Lease] == nil {
				return store.ErrLeaseNotFound
			}
			if p.IgnoreValue || p.IgnoreLease {
				if _, ok := start[string(p.Key)]; !ok {
					return store.ErrKeyNotFound
				}
				for _, k := range *deleted {
					if k == string(p.Key) {
						return store.ErrKeyNotFound
					}
				}
			}
		case op.DeleteRange != nil:
			for _, k := range sortedKeys(start) {
				if inRange(k, string(op.DeleteRange.Key), string(op.DeleteRange.RangeEnd)) {
					*deleted = append(*deleted, k)
				}
			}
		case op.Txn != nil:
			if err := m.checkBranch(op.Txn, start, deleted); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *model) execTxn(tx *mtxn, r *store.TxnRequest, start map[string]mkv, resp *store.TxnResponse) {
	resp.Succeeded = m.compares(r.Compare, start)
	ops := r.Success
	if !resp.Succeeded {
		ops = r.Failure
	}
	// the revision a read inside the txn sees: the next one once something changed
	seen := func() int64 {
		if len(tx.evs) > 0 {
			return tx.next()
		}
		return m.rev
	}
	resp.Responses = make([]store.ResponseOp, len(ops))
	for i, op := range ops {
		out := &resp.Responses[i]
		switch {
		case op.Range != nil:
			rr, err := m.rangeAt(op.Range, tx.state, seen())
			if err != nil {
				panic("model: a checked range failed: " + err.Error())
			}
			out.Range = rr
		case op.Put != nil:
			p := op.Put
			old, ok := tx.state[string(p.Key)]
			pr := &store.PutResponse{Header: store.Header{Revision: tx.next()}}
			if p.PrevKV && ok {
				pr.PrevKV = toKV(string(p.Key), old)
			}
			tx.put(string(p.Key), string(p.Value), p.Lease, p.IgnoreValue, p.IgnoreLease)
			out.Put = pr
		case op.DeleteRange != nil:
			d := op.DeleteRange
			deleted, prevs := tx.deleteRange(string(d.Key), string(d.RangeEnd))
			dr := &store.DeleteRangeResponse{Deleted: int64(len(deleted)), Header: store.Header{Revision: seen()}}
			if d.PrevKV {
				for j, k := range deleted {
					dr.PrevKVs = append(dr.PrevKVs, *toKV(k, prevs[j]))
				}
			}
			out.DeleteRange = dr
		case op.Txn != nil:
			sub := &store.TxnResponse{}
			m.execTxn(tx, op.Txn, start, sub)
			out.Txn = sub
		}
	}
}

// ---- leases ----

func (m *model) grant(id, ttl, minTTL int64, chosen int64) (*store.LeaseGrantResponse, error) {
	if ttl > store.MaxLeaseTTL {
		return nil, store.ErrLeaseTTLTooLarge
	}
	if id == 0 {
		if chosen <= 0 || m.leases[chosen] != nil {
			return nil, errors.New("model: the store chose an invalid lease ID")
		}
		id = chosen
	}
	if m.leases[id] != nil {
		return nil, store.ErrLeaseExists
	}
	ttl = max(ttl, minTTL)
	m.leases[id] = &mlease{id: id, ttl: ttl, expiry: m.now.Add(time.Duration(ttl) * time.Second), keys: map[string]bool{}}
	return &store.LeaseGrantResponse{Header: store.Header{Revision: m.rev}, ID: id, TTL: ttl}, nil
}

func (m *model) revoke(id int64) (*store.LeaseRevokeResponse, error) {
	l := m.leases[id]
	if l == nil {
		return nil, store.ErrLeaseNotFound
	}
	m.revokeLease(l)
	return &store.LeaseRevokeResponse{Header: store.Header{Revision: m.rev}}, nil
}

func (m *model) revokeLease(l *mlease) {
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tx := m.begin()
	for _, k := range keys {
		tx.deleteRange(k, "")
	}
	delete(m.leases, l.id)
	tx.commit()
}

func (m *model) keepAlive(id int64) (*store.LeaseKeepAliveResponse, error) {
	l := m.leases[id]
	if l == nil || !l.expiry.After(m.now) {
		return nil, store.ErrLeaseNotFound
	}
	l.expiry = m.now.Add(time.Duration(l.ttl) * time.Second)
	return &store.LeaseKeepAliveResponse{Header: store.Header{Revision: m.rev}, ID: id, TTL: l.ttl}, nil
}

func (m *model) timeToLive(id int64) (*store.LeaseTimeToLiveResponse, error) {
	l := m.leases[id]
	if l == nil {
		return nil, store.ErrLeaseNotFound
	}
	resp := &store.LeaseTimeToLiveResponse{Header: store.Header{Revision: m.rev}, ID: id,
		TTL: int64(l.expiry.Sub(m.now).Seconds()), GrantedTTL: l.ttl}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	resp.Keys = make([][]byte, len(keys))
	for i, k := range keys {
		resp.Keys[i] = []byte(k)
	}
	return resp, nil
}

// tick is what the store's Tick does to leases at the model's current time.
func (m *model) tick(leaseCheck time.Duration) {
	if m.now.Before(m.nextLease) {
		return
	}
	var due []*mlease
	for _, l := range m.leases {
		if !l.expiry.After(m.now) {
			due = append(due, l)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].expiry.Equal(due[j].expiry) {
			return due[i].expiry.Before(due[j].expiry)
		}
		return due[i].id < due[j].id
	})
	for _, l := range due {
		m.revokeLease(l)
	}
	m.nextLease = m.now.Add(leaseCheck)
}

// owed extends the watcher's list of owed events to the model's current revision and returns it:
// everything in [key, end) from revision from on, in order, minus what its filters drop.
func (m *model) owed(w *smWatcher) []mevent {
	if w.scanned < w.from-1 {
		w.scanned = w.from - 1
	}
	for rev := max(w.scanned+1, 2); rev <= m.rev; rev++ {
		for _, ev := range m.events[rev] {
			if !inRange(ev.key, w.key, w.end) || (w.noPut && !ev.del) || (w.noDelete && ev.del) {
				continue
			}
			w.owed = append(w.owed, ev)
		}
	}
	w.scanned = max(w.scanned, m.rev)
	return w.owed
}

// droppable reports whether a watcher may miss ev: after a compaction at ev's revision, history
// keeps only the last change of each key there (key_index.go compact keeps the newest revision at
// or below the compact revision, kvstore_compaction.go deletes the rest), so a watcher reading that
// revision from history afterwards gets no earlier change of the same key. A txn makes two changes
// of one key in a revision with a put and a delete from the key, in either order.
func (m *model) droppable(ev mevent) bool {
	if !containsInt64(m.compacts, ev.kv.mod) {
		return false
	}
	for _, later := range m.events[ev.kv.mod][ev.sub+1:] {
		if later.key == ev.key {
			return true
		}
	}
	return false
}
