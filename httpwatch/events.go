package httpwatch

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// eventFields names where the two versions of an event keep what the printer and the field
// labels read: core/v1 involvedObject, message, source, firstTimestamp, lastTimestamp and count;
// events.k8s.io/v1 regarding, note, deprecatedSource, deprecatedFirstTimestamp,
// deprecatedLastTimestamp and deprecatedCount.
type eventFields struct {
	regarding, message, source, reporting, first, last, count string
}

var (
	coreEventFields   = eventFields{"involvedObject", "message", "source", "reportingComponent", "firstTimestamp", "lastTimestamp", "count"}
	eventsEventFields = eventFields{"regarding", "note", "deprecatedSource", "reportingController", "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"}
)

// Events is core/v1 events with the event field labels (pkg/registry/core/event strategy.go
// ToSelectableFields: involvedObject.*, reason, reportingComponent, source, type), so that
// `kubectl describe` finds the events of an object. As upstream, a PUT of a missing event creates
// it and events are not garbage collected by their involved object. Each create and update gives
// an event Config.EventTTL to live (the apiserver's --event-ttl).
func Events() Resource {
	return Resource{
		Version: "v1", Resource: "events", Kind: "Event", ShortNames: []string{"ev"},
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true,
		SelectableFields: append(eventRegardingFields("involvedObject", "involvedObject"),
			selectable("reason"), selectable("reportingComponent"), selectable("type"),
			SelectableField{Label: "source", Path: []string{"source", "component"}, Fallback: []string{"reportingComponent"}}),
		strategy: &strategy{allowCreateOnUpdate: true, noGarbageCollection: true, noNameColumn: true, eventTTL: true,
			columns: eventColumns(coreEventFields), validate: eventValidation(""), validatesMeta: true},
	}
}

// EventsV1 is events.k8s.io/v1 events: the same events as core/v1's (stored under the same key
// prefix, at core/v1, and converted by its storage codec), with Config.EventTTL as core/v1's, that
// version's validation and field labels (pkg/apis/events/v1 conversion.go
// AddFieldLabelConversionsForEvent: regarding.*, reason, reportingController, type; no source).
func EventsV1() Resource {
	return Resource{
		Group: "events.k8s.io", Version: "v1", Resource: "events", Kind: "Event",
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true,
		SelectableFields: append(eventRegardingFields("regarding", "regarding"),
			selectable("reason"), selectable("reportingController"), selectable("type")),
		strategy: &strategy{allowCreateOnUpdate: true, noGarbageCollection: true, noNameColumn: true, eventTTL: true,
			columns: eventColumns(eventsEventFields), validate: eventValidation("events.k8s.io"), validatesMeta: true,
			codec: eventCodec{}, coreErrors: true},
	}
}

// eventRegardingFields are the field labels of the object an event is about.
func eventRegardingFields(label, field string) []SelectableField {
	var out []SelectableField
	for _, f := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
		out = append(out, SelectableField{Label: label + "." + f, Path: []string{field, f}})
	}
	return out
}

// eventColumns mirrors the printers' printEvent: Last Seen, Type, Reason, Object and Message, and
// with -o wide Subobject and Source before Message, First Seen, Count and Name after it.
func eventColumns(f eventFields) []Column {
	return []Column{
		{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"],
			value: func(obj map[string]any, now time.Time) any { last, _, _ := eventSeen(obj, f, now); return last }},
		{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"],
			value: func(obj map[string]any, _ time.Time) any { return str(obj, "type") }},
		{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"],
			value: func(obj map[string]any, _ time.Time) any { return str(obj, "reason") }},
		{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"],
			value: func(obj map[string]any, _ time.Time) any {
				target := strings.ToLower(str(obj, f.regarding, "kind"))
				if name := str(obj, f.regarding, "name"); name != "" {
					target += "/" + name
				}
				return target
			}},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"],
			value: func(obj map[string]any, _ time.Time) any { return str(obj, f.regarding, "fieldPath") }},
		{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"],
			value: func(obj map[string]any, _ time.Time) any { return eventSource(obj, f) }},
		{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"],
			value: func(obj map[string]any, _ time.Time) any { return strings.TrimSpace(str(obj, f.message)) }},
		{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"],
			value: func(obj map[string]any, now time.Time) any { _, first, _ := eventSeen(obj, f, now); return first }},
		{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"],
			value: func(obj map[string]any, now time.Time) any { _, _, count := eventSeen(obj, f, now); return count }},
		{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: nameDescription,
			value: func(obj map[string]any, _ time.Time) any { return str(obj, "metadata", "name") }},
	}
}

// eventSource is the source's component and host, each falling back to the reporting controller
// and instance of an event of the new API, joined by ", ".
//
// Mirrors formatEventSource (k8s.io/kubernetes pkg/printers/internalversion printers.go).
func eventSource(obj map[string]any, f eventFields) string {
	component, instance := str(obj, f.source, "component"), str(obj, f.source, "host")
	if component == "" {
		component = str(obj, f.reporting)
	}
	if instance == "" {
		instance = str(obj, "reportingInstance")
	}
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

// eventSeen mirrors printEvent's timestamps and count: the first seen falls back to eventTime, the
// last seen to the first, and a series gives both the last seen and the count.
func eventSeen(obj map[string]any, f eventFields, now time.Time) (last, first string, count int64) {
	first = since(str(obj, f.first), now)
	if str(obj, f.first) == "" {
		first = since(str(obj, "eventTime"), now)
	}
	last = since(str(obj, f.last), now)
	if str(obj, f.last) == "" {
		last = first
	}
	count = integer(obj, f.count)
	if _, found, _ := unstructured.NestedFieldNoCopy(obj, "series"); found {
		last = since(str(obj, "series", "lastObservedTime"), now)
		count = integer(obj, "series", "count")
	} else if count == 0 {
		count = 1
	}
	return last, first, count
}

// since is translateTimestampSince: the time since an RFC 3339 timestamp (with or without
// microseconds), or <unknown>.
func since(s string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if s == "" || err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
