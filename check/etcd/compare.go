package etcd

// Responses are compared field by field. A nil body reads as its zero value, so a recorder may leave
// empty bodies out. The header revision is compared for every request but a keepalive, whose header
// etcd fills when the answer is sent rather than when the request takes effect; lease TTLs are never
// compared (they depend on the server's minimum TTL and on time). A range sorted by anything but the
// key is accepted in any order etcd's unstable sort could produce (rangeMatches).

func responseMatches(req *Request, want *Response, ties map[*RangeResponse]*rangeTies, got *Response) bool {
	if req.LeaseKeepAlive == nil && want.Revision != got.Revision {
		return false
	}
	switch {
	case req.Range != nil:
		return rangeMatches(req.Range, want.Range, ties, got.Range)
	case req.Put != nil:
		return putMatches(want.Put, got.Put)
	case req.DeleteRange != nil:
		return deleteMatches(want.DeleteRange, got.DeleteRange)
	case req.Txn != nil:
		return txnMatches(req.Txn, want.Txn, ties, got.Txn)
	case req.LeaseGrant != nil:
		return got.LeaseGrant != nil && want.LeaseGrant.ID == got.LeaseGrant.ID
	case req.LeaseKeepAlive != nil:
		return got.LeaseKeepAlive == nil || want.LeaseKeepAlive.ID == got.LeaseKeepAlive.ID
	}
	return true
}

func putMatches(want, got *PutResponse) bool {
	var w, g *KeyValue
	if want != nil {
		w = want.PrevKV
	}
	if got != nil {
		g = got.PrevKV
	}
	return kvPtrEqual(w, g)
}

func deleteMatches(want, got *DeleteRangeResponse) bool {
	if want == nil {
		want = &DeleteRangeResponse{}
	}
	if got == nil {
		got = &DeleteRangeResponse{}
	}
	return want.Deleted == got.Deleted && kvsEqual(want.PrevKVs, got.PrevKVs)
}

func txnMatches(req *TxnRequest, want *TxnResponse, ties map[*RangeResponse]*rangeTies, got *TxnResponse) bool {
	if got == nil {
		got = &TxnResponse{}
	}
	if want.Succeeded != got.Succeeded || len(want.Responses) != len(got.Responses) {
		return false
	}
	ops := req.Success
	if !want.Succeeded {
		ops = req.Failure
	}
	for i := range want.Responses {
		w, g := &want.Responses[i], &got.Responses[i]
		switch op := ops[i]; {
		case op.Range != nil:
			if g.Put != nil || g.DeleteRange != nil || g.Txn != nil || !rangeMatches(op.Range, w.Range, ties, g.Range) {
				return false
			}
		case op.Put != nil:
			if g.Range != nil || g.DeleteRange != nil || g.Txn != nil || !putMatches(w.Put, g.Put) {
				return false
			}
		case op.DeleteRange != nil:
			if g.Range != nil || g.Put != nil || g.Txn != nil || !deleteMatches(w.DeleteRange, g.DeleteRange) {
				return false
			}
		case op.Txn != nil:
			if g.Range != nil || g.Put != nil || g.DeleteRange != nil || !txnMatches(op.Txn, w.Txn, ties, g.Txn) {
				return false
			}
		}
	}
	return true
}

// rangeMatches accepts got if it equals want or, for a range sorted by a target other than the key,
// if it is one of the results etcd's unstable sort can give: the same count and more, as many kvs,
// each one of the candidates, in the requested order, and every candidate that sorts strictly before
// the last one returned is returned.
func rangeMatches(req *RangeRequest, want *RangeResponse, ties map[*RangeResponse]*rangeTies, got *RangeResponse) bool {
	if got == nil {
		got = &RangeResponse{}
	}
	if want == nil {
		want = &RangeResponse{}
	}
	if want.Count != got.Count || want.More != got.More || len(want.Kvs) != len(got.Kvs) {
		return false
	}
	if kvsEqual(want.Kvs, got.Kvs) {
		return true
	}
	t := ties[want]
	if t == nil {
		return false
	}
	_, by := sortOf(req)
	pos := make(map[Bytes]int, len(t.cand))
	for i, c := range t.cand {
		pos[c.Key] = i
	}
	used := make([]bool, len(t.cand))
	last := -1
	for _, kv := range got.Kvs {
		i, ok := pos[kv.Key]
		if !ok || used[i] {
			return false
		}
		used[i] = true
		c := t.cand[i]
		keysOnlyKV(&c, req)
		if c != kv {
			return false
		}
		if last >= 0 && by(t.cand[last], t.cand[i]) > 0 {
			return false
		}
		last = i
	}
	if last < 0 {
		return true
	}
	for i, c := range t.cand {
		if !used[i] && by(c, t.cand[last]) < 0 {
			return false
		}
	}
	return true
}

func kvPtrEqual(a, b *KeyValue) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func kvsEqual(a, b []KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
