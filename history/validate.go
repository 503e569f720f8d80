package history

import (
	"encoding/json"
	"fmt"
	"io"
)

// ReadJSON decodes a history in the JSON form doc.go describes, rejecting unknown fields, and
// validates it. Its errors wrap ErrInvalidHistory.
func ReadJSON(r io.Reader) (*History, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var h History
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidHistory, err)
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	return &h, nil
}

// WriteJSON encodes h in the JSON form doc.go describes.
func (h *History) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(h)
}

// Validate checks that h is well formed. Its errors wrap ErrInvalidHistory and name the first
// problem found.
func (h *History) Validate() error {
	if h == nil {
		return fmt.Errorf("%w: nil history", ErrInvalidHistory)
	}
	for i := range h.Operations {
		if err := validateOperation(&h.Operations[i]); err != nil {
			return fmt.Errorf("%w: operation %d: %v", ErrInvalidHistory, i, err)
		}
	}
	for i := range h.Watches {
		if err := validateWatch(&h.Watches[i]); err != nil {
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
