package etcd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// short quotes b, cut in the middle when long: a key's prefix is shared by every key of a run, so
// that its end is what tells keys apart.
func short(b Bytes) string {
	const head, tail = 14, 22
	s := []rune(strconv.Quote(string(b)))
	if len(s) > head+tail+1 {
		return string(s[:head]) + "…" + string(s[len(s)-tail:])
	}
	return string(s)
}

// full quotes b whole, as the report's full texts show keys and values.
func full(b Bytes) string { return strconv.Quote(string(b)) }

func describeRange(key, end Bytes) string { return describeRangeQ(key, end, short) }

func describeRangeQ(key, end Bytes, q func(Bytes) string) string {
	switch end {
	case "":
		return q(key)
	case "\x00":
		return "[" + q(key) + ", ∞)"
	}
	return "[" + q(key) + ", " + q(end) + ")"
}

// DescribeRequest is a one-line description of a request, as the report shows it.
func DescribeRequest(r *Request) string { return describeRequest(r, short) }

// describeRequest describes r with its keys and values quoted by q.
func describeRequest(r *Request, q func(Bytes) string) string {
	switch {
	case r.Range != nil:
		s := "range " + describeRangeQ(r.Range.Key, r.Range.RangeEnd, q)
		if r.Range.Revision != 0 {
			s += " @" + itoa64(r.Range.Revision)
		}
		if r.Range.Limit != 0 {
			s += " limit " + itoa64(r.Range.Limit)
		}
		if r.Range.Serializable {
			s += " serializable"
		}
		return s
	case r.Put != nil:
		s := "put " + q(r.Put.Key) + "=" + q(r.Put.Value)
		if r.Put.Lease != 0 {
			s += " lease " + itoa64(r.Put.Lease)
		}
		return s
	case r.DeleteRange != nil:
		return "delete " + describeRangeQ(r.DeleteRange.Key, r.DeleteRange.RangeEnd, q)
	case r.Txn != nil:
		return fmt.Sprintf("txn (%d compares, %d/%d ops)", len(r.Txn.Compare), len(r.Txn.Success), len(r.Txn.Failure))
	case r.Compact != nil:
		return "compact " + itoa64(r.Compact.Revision)
	case r.LeaseGrant != nil:
		return "grant lease " + itoa64(r.LeaseGrant.ID) + " ttl " + itoa64(r.LeaseGrant.TTL)
	case r.LeaseRevoke != nil:
		return "revoke lease " + itoa64(r.LeaseRevoke.ID)
	case r.LeaseKeepAlive != nil:
		return "keepalive lease " + itoa64(r.LeaseKeepAlive.ID)
	}
	return "empty request"
}

// DescribeOutcome is a one-line description of an operation's outcome.
func DescribeOutcome(op *Operation) string {
	switch {
	case op.Unknown:
		return "unknown: " + op.Error
	case op.Error != "":
		return "error: " + op.Error
	}
	r := op.Response
	s := "rev " + itoa64(r.Revision)
	switch {
	case r.Range != nil:
		s += fmt.Sprintf(", %d kvs, count %d", len(r.Range.Kvs), r.Range.Count)
	case r.DeleteRange != nil:
		s += ", deleted " + itoa64(r.DeleteRange.Deleted)
	case r.Txn != nil:
		s += fmt.Sprintf(", succeeded %v", r.Txn.Succeeded)
	case r.LeaseGrant != nil:
		s += ", lease " + itoa64(r.LeaseGrant.ID)
	}
	return s
}

func describeOp(op *kvOp) string {
	if op.reach > 0 && op.watch < 0 {
		return "a serializable read saw revision " + itoa64(op.reach)
	}
	if op.reach > 0 {
		return "watch " + itoa(op.watch) + " saw revision " + itoa64(op.reach)
	}
	if op.index < 0 {
		return "expiry of lease " + itoa64(op.req.LeaseRevoke.ID)
	}
	var o Operation
	o.Request, o.Response, o.Error, o.Unknown = *op.req, op.resp, op.errMsg, op.unknown
	return "#" + itoa(op.index) + " " + DescribeRequest(op.req) + " → " + DescribeOutcome(&o)
}

func describeState(s *mstate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d, compact revision %d, %d keys", s.rev, s.compactRev, sizeOf(s.kv()))
	n := 0
	s.kv().ascend(keyRange{isRange: true}, func(k Bytes, r *krec) bool {
		if n == 8 {
			b.WriteString(", …")
			return false
		}
		fmt.Fprintf(&b, ", %s=%s (mod %d)", short(k), short(r.value), r.mod)
		n++
		return true
	})
	if len(s.leases) > 0 {
		fmt.Fprintf(&b, ", leases %v", s.leases)
	}
	return b.String()
}

// recordedOutcome is what a diff shows of an outcome.
type recordedOutcome struct {
	Response *Response
	Error    string
}

var diffOptions = cmp.Options{cmpopts.EquateEmpty()}

func diffOutcome(o outcome, op *kvOp) string {
	want := recordedOutcome{Response: o.resp}
	if o.err != nil {
		want = recordedOutcome{Error: o.err.Error()}
	}
	got := recordedOutcome{Response: op.resp, Error: op.errMsg}
	if op.unknown {
		got.Error = "unknown: " + op.errMsg
	}
	return cmp.Diff(want, got, diffOptions)
}
