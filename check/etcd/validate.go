package etcd

import (
	"fmt"
	"io"

	"github.com/listwatch/listwatch/check"
)

// ReadJSON decodes a history in the JSON form doc.go describes, rejecting unknown fields, and
// validates it. Its errors wrap ErrInvalidHistory.
func ReadJSON(r io.Reader) (*History, error) { return check.ReadJSON[History](r) }

// WriteJSON encodes h in the JSON form doc.go describes.
func (h *History) WriteJSON(w io.Writer) error { return check.WriteJSON(w, h) }

// Validate checks that h is well formed. Its errors wrap ErrInvalidHistory and name the first
// problem found.
func (h *History) Validate() error {
	if h == nil {
		return fmt.Errorf("%w: nil history", ErrInvalidHistory)
	}
	if h.Run != nil {
		if err := check.CheckSchema(h.Run.Schema); err != nil {
			return err
		}
	}
	if err := h.validateStart(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidHistory, err)
	}
	for i := range h.Operations {
		if err := validateOperation(&h.Operations[i]); err == nil && h.Open() {
			if err := h.validateScope(&h.Operations[i].Request); err != nil {
				return fmt.Errorf("%w: operation %d: %v", ErrInvalidHistory, i, err)
			}
		} else if err != nil {
			return fmt.Errorf("%w: operation %d: %v", ErrInvalidHistory, i, err)
		}
	}
	for i := range h.Watches {
		if err := validateWatch(&h.Watches[i]); err == nil && h.Open() {
			w := &h.Watches[i].Request
			key := w.Key
			if key == "" {
				key = "\x00"
			}
			if !h.inPrefix(key, w.RangeEnd) {
				return fmt.Errorf("%w: watch %d: watches %s, outside the prefix %s", ErrInvalidHistory, i, describeRange(key, w.RangeEnd), short(h.Prefix))
			}
		} else if err != nil {
			return fmt.Errorf("%w: watch %d: %v", ErrInvalidHistory, i, err)
		}
	}
	return nil
}

func validateOperation(op *Operation) error {
	if op.Client < 0 {
		return fmt.Errorf("negative client %d", op.Client)
	}
	if op.Return < op.Call {
		return fmt.Errorf("returns (%d) before it is called (%d)", op.Return, op.Call)
	}
	kind, err := requestKind(&op.Request)
	if err != nil {
		return err
	}
	switch {
	case op.Response != nil && op.Error != "":
		return fmt.Errorf("has both a response and an error")
	case op.Response == nil && op.Error == "":
		return fmt.Errorf("has neither a response nor an error")
	case op.Unknown && op.Error == "":
		return fmt.Errorf("unknown outcome without an error")
	}
	if op.Response != nil {
		if err := checkResponseKind(kind, op.Response); err != nil {
			return err
		}
	}
	if op.Request.Txn != nil {
		if err := validateTxn(op.Request.Txn); err != nil {
			return err
		}
	}
	return nil
}

func requestKind(r *Request) (string, error) {
	var kinds []string
	add := func(set bool, name string) {
		if set {
			kinds = append(kinds, name)
		}
	}
	add(r.Range != nil, "range")
	add(r.Put != nil, "put")
	add(r.DeleteRange != nil, "delete_range")
	add(r.Txn != nil, "txn")
	add(r.Compact != nil, "compact")
	add(r.LeaseGrant != nil, "lease_grant")
	add(r.LeaseRevoke != nil, "lease_revoke")
	add(r.LeaseKeepAlive != nil, "lease_keep_alive")
	switch len(kinds) {
	case 0:
		return "", fmt.Errorf("request sets nothing")
	case 1:
		return kinds[0], nil
	}
	return "", fmt.Errorf("request sets %v; exactly one is allowed", kinds)
}

func checkResponseKind(kind string, r *Response) error {
	var set []string
	add := func(b bool, name string) {
		if b {
			set = append(set, name)
		}
	}
	add(r.Range != nil, "range")
	add(r.Put != nil, "put")
	add(r.DeleteRange != nil, "delete_range")
	add(r.Txn != nil, "txn")
	add(r.LeaseGrant != nil, "lease_grant")
	add(r.LeaseKeepAlive != nil, "lease_keep_alive")
	for _, s := range set {
		if s != kind {
			return fmt.Errorf("%s request has a %s response", kind, s)
		}
	}
	if kind == "lease_grant" && r.LeaseGrant == nil {
		return fmt.Errorf("lease_grant response without the lease ID")
	}
	return nil
}

func validateTxn(t *TxnRequest) error {
	for _, ops := range [][]RequestOp{t.Success, t.Failure} {
		for i, op := range ops {
			n := 0
			for _, b := range []bool{op.Range != nil, op.Put != nil, op.DeleteRange != nil, op.Txn != nil} {
				if b {
					n++
				}
			}
			if n > 1 {
				return fmt.Errorf("txn op %d sets %d requests; at most one is allowed", i, n)
			}
			if op.Txn != nil {
				if err := validateTxn(op.Txn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func validateWatch(w *Watch) error {
	if w.Client < 0 {
		return fmt.Errorf("negative client %d", w.Client)
	}
	for i, r := range w.Responses {
		if r.Time < w.Call {
			return fmt.Errorf("response %d received (%d) before the watch was called (%d)", i, r.Time, w.Call)
		}
		for j, ev := range r.Events {
			if ev.Type != Put && ev.Type != Delete {
				return fmt.Errorf("response %d event %d has type %d", i, j, ev.Type)
			}
		}
	}
	return nil
}

// validateStart checks where the history begins: nothing for a closed history; for an open one, the
// initial state in key order, under the prefix, as of the start revision.
func (h *History) validateStart() error {
	switch {
	case h.StartRevision < 0:
		return fmt.Errorf("negative start revision %d", h.StartRevision)
	case !h.Open() && (h.Prefix != "" || len(h.Initial) > 0):
		return fmt.Errorf("a prefix or an initial state needs a start revision")
	}
	for i, kv := range h.Initial {
		switch {
		case i > 0 && kv.Key <= h.Initial[i-1].Key:
			return fmt.Errorf("initial key %d (%s) is not after %s: the initial state must be in key order, each key once", i, short(kv.Key), short(h.Initial[i-1].Key))
		case !h.inPrefix(kv.Key, ""):
			return fmt.Errorf("initial key %s is outside the prefix %s", short(kv.Key), short(h.Prefix))
		case kv.ModRevision > h.StartRevision || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision || kv.Version < 1:
			return fmt.Errorf("initial key %s: create revision %d, mod revision %d and version %d are not those of a key at revision %d",
				short(kv.Key), kv.CreateRevision, kv.ModRevision, kv.Version, h.StartRevision)
		}
	}
	return nil
}

// inPrefix reports whether every key of [key, end) (etcd's key and range end) is under the prefix.
func (h *History) inPrefix(key, end Bytes) bool {
	if h.Prefix == "" {
		return true
	}
	pe := PrefixEnd(h.Prefix)
	below := func(k Bytes) bool { return pe == "\x00" || k < pe }
	switch end {
	case "":
		return key >= h.Prefix && below(key)
	case "\x00":
		return key >= h.Prefix && pe == "\x00"
	}
	return key >= h.Prefix && (pe == "\x00" || end <= pe)
}

// validateScope checks that an open history's request names only keys under its prefix, and no
// revision below its start inside a txn (a range alone there is left unjudged; a txn's outcome
// would depend on it).
func (h *History) validateScope(req *Request) error {
	out := func(what string, key, end Bytes) error {
		return fmt.Errorf("%s %s is outside the prefix %s", what, describeRange(key, end), short(h.Prefix))
	}
	switch {
	case req.Range != nil:
		if !h.inPrefix(req.Range.Key, req.Range.RangeEnd) {
			return out("range", req.Range.Key, req.Range.RangeEnd)
		}
	case req.Put != nil:
		if !h.inPrefix(req.Put.Key, "") {
			return out("put of", req.Put.Key, "")
		}
	case req.DeleteRange != nil:
		if !h.inPrefix(req.DeleteRange.Key, req.DeleteRange.RangeEnd) {
			return out("delete of", req.DeleteRange.Key, req.DeleteRange.RangeEnd)
		}
	case req.Txn != nil:
		return h.validateTxnScope(req.Txn)
	}
	return nil
}

func (h *History) validateTxnScope(t *TxnRequest) error {
	for _, c := range t.Compare {
		if !h.inPrefix(c.Key, c.RangeEnd) {
			return fmt.Errorf("txn compare on %s is outside the prefix %s", describeRange(c.Key, c.RangeEnd), short(h.Prefix))
		}
	}
	for _, ops := range [][]RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			var err error
			switch {
			case op.Range != nil:
				if r := op.Range.Revision; r > 0 && r < h.StartRevision {
					return fmt.Errorf("txn reads revision %d, below the start revision %d: its outcome cannot be judged", r, h.StartRevision)
				}
				err = h.validateScope(&Request{Range: op.Range})
			case op.Put != nil:
				err = h.validateScope(&Request{Put: op.Put})
			case op.DeleteRange != nil:
				err = h.validateScope(&Request{DeleteRange: op.DeleteRange})
			case op.Txn != nil:
				err = h.validateTxnScope(op.Txn)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
