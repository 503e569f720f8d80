package etcdrules

import "fmt"

// The enums of etcdserverpb and mvccpb that requests and events carry, with their protobuf values.
// Their text form (String, and JSON through MarshalText) is the protobuf name.

// EventType is mvccpb.Event_EventType; text "PUT" or "DELETE".
type EventType int32

// The event types.
const (
	EventPut    EventType = 0
	EventDelete EventType = 1
)

// WatchFilter is WatchCreateRequest.FilterType; text "NOPUT" or "NODELETE".
type WatchFilter int32

// The watch filters.
const (
	FilterNoPut    WatchFilter = 0
	FilterNoDelete WatchFilter = 1
)

// SortOrder is RangeRequest.SortOrder; text "NONE", "ASCEND" or "DESCEND".
type SortOrder int32

// The sort orders.
const (
	SortNone    SortOrder = 0
	SortAscend  SortOrder = 1
	SortDescend SortOrder = 2
)

// SortTarget is RangeRequest.SortTarget; text "KEY", "VERSION", "CREATE", "MOD" or "VALUE".
type SortTarget int32

// The sort targets.
const (
	SortByKey     SortTarget = 0
	SortByVersion SortTarget = 1
	SortByCreate  SortTarget = 2
	SortByMod     SortTarget = 3
	SortByValue   SortTarget = 4
)

// CompareResult is Compare.Result; text "EQUAL", "GREATER", "LESS" or "NOT_EQUAL".
type CompareResult int32

// The compare results.
const (
	CompareEqual    CompareResult = 0
	CompareGreater  CompareResult = 1
	CompareLess     CompareResult = 2
	CompareNotEqual CompareResult = 3
)

// CompareTarget is Compare.Target; text "VERSION", "CREATE", "MOD", "VALUE" or "LEASE".
type CompareTarget int32

// The compare targets.
const (
	CompareVersion CompareTarget = 0
	CompareCreate  CompareTarget = 1
	CompareMod     CompareTarget = 2
	CompareValue   CompareTarget = 3
	CompareLease   CompareTarget = 4
)

var (
	eventTypeNames     = []string{"PUT", "DELETE"}
	watchFilterNames   = []string{"NOPUT", "NODELETE"}
	sortOrderNames     = []string{"NONE", "ASCEND", "DESCEND"}
	sortTargetNames    = []string{"KEY", "VERSION", "CREATE", "MOD", "VALUE"}
	compareResultNames = []string{"EQUAL", "GREATER", "LESS", "NOT_EQUAL"}
	compareTargetNames = []string{"VERSION", "CREATE", "MOD", "VALUE", "LEASE"}
)

func enumString(names []string, v int32) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%d", v)
}

func enumMarshal(kind string, names []string, v int32) ([]byte, error) {
	if v >= 0 && int(v) < len(names) {
		return []byte(names[v]), nil
	}
	return nil, fmt.Errorf("invalid %s %d", kind, v)
}

func enumUnmarshal(kind string, names []string, text []byte) (int32, error) {
	for i, n := range names {
		if n == string(text) {
			return int32(i), nil
		}
	}
	return 0, fmt.Errorf("invalid %s %q (want one of %v)", kind, text, names)
}

func enumOrNumber(kind string, names []string, b []byte) (int32, error) {
	if v, err := enumUnmarshal(kind, names, b); err == nil {
		return v, nil
	}
	var n int32
	if _, err := fmt.Sscanf(string(b), "%d", &n); err == nil && fmt.Sprint(n) == string(b) {
		return n, nil
	}
	return 0, fmt.Errorf("invalid %s %q (want one of %v or a number)", kind, b, names)
}

// String returns the event type's name, as in JSON.
func (t EventType) String() string { return enumString(eventTypeNames, int32(t)) }

// MarshalText implements encoding.TextMarshaler.
func (t EventType) MarshalText() ([]byte, error) {
	return enumMarshal("event type", eventTypeNames, int32(t))
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *EventType) UnmarshalText(b []byte) error {
	v, err := enumUnmarshal("event type", eventTypeNames, b)
	*t = EventType(v)
	return err
}

// String returns the filter's name, as in JSON.
func (f WatchFilter) String() string { return enumString(watchFilterNames, int32(f)) }

// MarshalText implements encoding.TextMarshaler.
func (f WatchFilter) MarshalText() ([]byte, error) {
	return enumMarshal("watch filter", watchFilterNames, int32(f))
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *WatchFilter) UnmarshalText(b []byte) error {
	v, err := enumUnmarshal("watch filter", watchFilterNames, b)
	*f = WatchFilter(v)
	return err
}

// String returns the order's name, as in JSON.
func (o SortOrder) String() string { return enumString(sortOrderNames, int32(o)) }

// MarshalText implements encoding.TextMarshaler. Out-of-range orders are kept as numbers, since etcd
// answers them with an error the history may record.
func (o SortOrder) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it also accepts a decimal number.
func (o *SortOrder) UnmarshalText(b []byte) error {
	v, err := enumOrNumber("sort order", sortOrderNames, b)
	*o = SortOrder(v)
	return err
}

// String returns the target's name, as in JSON.
func (t SortTarget) String() string { return enumString(sortTargetNames, int32(t)) }

// MarshalText implements encoding.TextMarshaler; out-of-range targets are kept as numbers.
func (t SortTarget) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it also accepts a decimal number.
func (t *SortTarget) UnmarshalText(b []byte) error {
	v, err := enumOrNumber("sort target", sortTargetNames, b)
	*t = SortTarget(v)
	return err
}

// String returns the result's name, as in JSON.
func (r CompareResult) String() string { return enumString(compareResultNames, int32(r)) }

// MarshalText implements encoding.TextMarshaler.
func (r CompareResult) MarshalText() ([]byte, error) {
	return enumMarshal("compare result", compareResultNames, int32(r))
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *CompareResult) UnmarshalText(b []byte) error {
	v, err := enumUnmarshal("compare result", compareResultNames, b)
	*r = CompareResult(v)
	return err
}

// String returns the target's name, as in JSON.
func (t CompareTarget) String() string { return enumString(compareTargetNames, int32(t)) }

// MarshalText implements encoding.TextMarshaler.
func (t CompareTarget) MarshalText() ([]byte, error) {
	return enumMarshal("compare target", compareTargetNames, int32(t))
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *CompareTarget) UnmarshalText(b []byte) error {
	v, err := enumUnmarshal("compare target", compareTargetNames, b)
	*t = CompareTarget(v)
	return err
}
