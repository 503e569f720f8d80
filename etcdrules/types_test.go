package etcdrules

import (
	"encoding"
	"encoding/json"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

type enumText interface {
	encoding.TextMarshaler
	String() string
}

// TestEnumNamesAreProtobufs: every enum value's text is its name in etcd's protobuf definitions,
// and the text reads back as the value.
func TestEnumNamesAreProtobufs(t *testing.T) {
	check := func(kind string, pbNames map[int32]string, value func(int32) enumText, parse func([]byte) (int32, error)) {
		t.Helper()
		for v, name := range pbNames {
			e := value(v)
			text, err := e.MarshalText()
			if err != nil || string(text) != name || e.String() != name {
				t.Errorf("%s %d: text %q (%v), String %q, protobuf %q", kind, v, text, err, e.String(), name)
			}
			if got, err := parse([]byte(name)); err != nil || got != v {
				t.Errorf("%s %q reads as %d, %v", kind, name, got, err)
			}
		}
		if _, err := parse([]byte("BOGUS")); err == nil || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s BOGUS: error %v does not name the %s", kind, err, kind)
		}
	}
	check("event type", mvccpb.Event_EventType_name, func(v int32) enumText { return EventType(v) },
		func(b []byte) (int32, error) { var e EventType; err := e.UnmarshalText(b); return int32(e), err })
	check("watch filter", pb.WatchCreateRequest_FilterType_name, func(v int32) enumText { return WatchFilter(v) },
		func(b []byte) (int32, error) { var e WatchFilter; err := e.UnmarshalText(b); return int32(e), err })
	check("sort order", pb.RangeRequest_SortOrder_name, func(v int32) enumText { return SortOrder(v) },
		func(b []byte) (int32, error) { var e SortOrder; err := e.UnmarshalText(b); return int32(e), err })
	check("sort target", pb.RangeRequest_SortTarget_name, func(v int32) enumText { return SortTarget(v) },
		func(b []byte) (int32, error) { var e SortTarget; err := e.UnmarshalText(b); return int32(e), err })
	check("compare result", pb.Compare_CompareResult_name, func(v int32) enumText { return CompareResult(v) },
		func(b []byte) (int32, error) { var e CompareResult; err := e.UnmarshalText(b); return int32(e), err })
	check("compare target", pb.Compare_CompareTarget_name, func(v int32) enumText { return CompareTarget(v) },
		func(b []byte) (int32, error) { var e CompareTarget; err := e.UnmarshalText(b); return int32(e), err })
}

// TestEnumsOutOfRange: an out-of-range sort order or target, which etcd answers with an error a
// history may record, is kept as a number; any other enum out of range cannot be written.
func TestEnumsOutOfRange(t *testing.T) {
	if text, err := SortOrder(7).MarshalText(); err != nil || string(text) != "7" {
		t.Errorf("sort order 7: %q, %v", text, err)
	}
	var o SortTarget
	if err := o.UnmarshalText([]byte("9")); err != nil || o != 9 {
		t.Errorf("sort target \"9\" reads as %d, %v", o, err)
	}
	if err := o.UnmarshalText([]byte("09")); err == nil {
		t.Errorf("sort target \"09\" reads as %d", o)
	}
	if _, err := CompareTarget(5).MarshalText(); err == nil || !strings.Contains(err.Error(), "compare target 5") {
		t.Errorf("compare target 5: error %v", err)
	}
	if got := EventType(2).String(); got != "2" {
		t.Errorf("event type 2 is %q", got)
	}
}

// TestHeadersAreNotInJSON: the JSON form (a history's) leaves out response headers and watch IDs.
func TestHeadersAreNotInJSON(t *testing.T) {
	for v, want := range map[any]string{
		&RangeResponse[string]{Header: ResponseHeader{Revision: 5}, Count: 1}: `{"count":1}`,
		&TxnResponse[string]{Header: ResponseHeader{Revision: 5}}:             `{}`,
		&LeaseGrantResponse{Header: ResponseHeader{Revision: 5}, ID: 7}:       `{"id":7}`,
		&WatchRequest[string]{Key: "a", WatchID: 3}:                           `{"key":"a"}`,
	} {
		if got, err := json.Marshal(v); err != nil || string(got) != want {
			t.Errorf("%T: %s, %v; want %s", v, got, err, want)
		}
	}
}

// TestRangeReadRules: the limit, order and revision filters etcd reads from a range request.
func TestRangeReadRules(t *testing.T) {
	for name, c := range map[string]struct {
		r      RangeRequest[string]
		fetch  int64
		order  SortOrder
		sorted bool
	}{
		"no limit":                     {RangeRequest[string]{Key: "a"}, 0, SortNone, false},
		"limit":                        {RangeRequest[string]{Key: "a", Limit: 3}, 4, SortNone, false},
		"limit, max":                   {RangeRequest[string]{Key: "a", Limit: 1<<63 - 1}, 1<<63 - 1, SortNone, false},
		"key ascending":                {RangeRequest[string]{Key: "a", Limit: 3, SortOrder: SortAscend}, 4, SortAscend, false},
		"key descending":               {RangeRequest[string]{Key: "a", Limit: 3, SortOrder: SortDescend}, 0, SortDescend, true},
		"target, no order":             {RangeRequest[string]{Key: "a", Limit: 3, SortTarget: SortByMod}, 4, SortAscend, true},
		"target, descending":           {RangeRequest[string]{Key: "a", Limit: 3, SortTarget: SortByMod, SortOrder: SortDescend}, 0, SortDescend, true},
		"revision filter":              {RangeRequest[string]{Key: "a", Limit: 3, MinModRevision: 2}, 0, SortNone, false},
		"create filter, key ascending": {RangeRequest[string]{Key: "a", Limit: 3, MaxCreateRevision: 2, SortOrder: SortAscend}, 0, SortAscend, false},
	} {
		if got := c.r.FetchLimit(); got != c.fetch {
			t.Errorf("%s: fetch limit %d, want %d", name, got, c.fetch)
		}
		if order, sorted := c.r.Sort(); order != c.order || sorted != c.sorted {
			t.Errorf("%s: sort %s, %v; want %s, %v", name, order, sorted, c.order, c.sorted)
		}
	}
	r := RangeRequest[string]{MinModRevision: 3, MaxModRevision: 5, MinCreateRevision: 2, MaxCreateRevision: 4}
	for _, c := range []struct {
		create, mod int64
		keep        bool
	}{{2, 3, true}, {4, 5, true}, {2, 2, false}, {2, 6, false}, {1, 3, false}, {5, 5, false}} {
		if got := r.Keeps(c.create, c.mod); got != c.keep {
			t.Errorf("create %d, mod %d: keeps %v", c.create, c.mod, got)
		}
	}
	if (&RangeRequest[string]{}).HasRevisionFilters() || !r.HasRevisionFilters() || !(&RangeRequest[string]{Limit: 1}).Keeps(9, 9) {
		t.Error("a range without revision filters filters, or one with them does not")
	}
}

// TestCompareHolds: each compare result against a key that compares below, equal to and above its
// value; an undefined result holds.
func TestCompareHolds(t *testing.T) {
	for result, want := range map[CompareResult][3]bool{
		CompareEqual:    {false, true, false},
		CompareNotEqual: {true, false, true},
		CompareGreater:  {false, false, true},
		CompareLess:     {true, false, false},
		9:               {true, true, true},
	} {
		c := Compare[string]{Result: result}
		for i, cmp := range []int{-1, 0, 1} {
			if got := c.Holds(cmp); got != want[i] {
				t.Errorf("%s with the key comparing %d: holds %v", result, cmp, got)
			}
		}
	}
}
