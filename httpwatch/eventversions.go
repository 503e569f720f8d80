package httpwatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/storage"
)

// The two versions of events are one resource, as in kube-apiserver: both keep their objects under
// /registry/events, stored at core/v1, and events.k8s.io/v1 reads and writes them through
// eventCodec, which converts between the versions as upstream's conversion through the internal
// Event does (a field renamed, none lost). Validation is upstream's too: core/v1 requests get the
// legacy checks only, events.k8s.io/v1 requests the strict ones.

// The limits of ValidateEventCreate (k8s.io/kubernetes pkg/apis/core/validation events.go).
const (
	eventReportingInstanceLimit = 128
	eventActionLimit            = 128
	eventReasonLimit            = 128
	eventNoteLimit              = 1024
)

// eventsV1ToCore converts an events.k8s.io/v1 event to core/v1.
//
// Mirrors Convert_v1_Event_To_core_Event (k8s.io/kubernetes pkg/apis/events/v1 conversion.go).
func eventsV1ToCore(in *eventsv1.Event) *corev1.Event {
	return &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: in.ObjectMeta, InvolvedObject: in.Regarding, Reason: in.Reason, Message: in.Note,
		Source: in.DeprecatedSource, FirstTimestamp: in.DeprecatedFirstTimestamp, LastTimestamp: in.DeprecatedLastTimestamp,
		Count: in.DeprecatedCount, Type: in.Type, EventTime: in.EventTime, Series: (*corev1.EventSeries)(in.Series),
		Action: in.Action, Related: in.Related, ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
	}
}

// coreToEventsV1 converts a core/v1 event to events.k8s.io/v1.
//
// Mirrors Convert_core_Event_To_v1_Event (k8s.io/kubernetes pkg/apis/events/v1 conversion.go).
func coreToEventsV1(in *corev1.Event) *eventsv1.Event {
	return &eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta: in.ObjectMeta, Regarding: in.InvolvedObject, Reason: in.Reason, Note: in.Message,
		DeprecatedSource: in.Source, DeprecatedFirstTimestamp: in.FirstTimestamp, DeprecatedLastTimestamp: in.LastTimestamp,
		DeprecatedCount: in.Count, Type: in.Type, EventTime: in.EventTime, Series: (*eventsv1.EventSeries)(in.Series),
		Action: in.Action, Related: in.Related, ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
	}
}

// eventCodec is the storage codec of events.k8s.io/v1 events: it decodes the stored core/v1 events
// to events.k8s.io/v1 and encodes at core/v1, as upstream's storage codec for the events resource
// (storage version core/v1) does.
type eventCodec struct{}

var _ storage.Codec = eventCodec{}

// Decode implements storage.Codec: the stored core/v1 event as events.k8s.io/v1.
func (eventCodec) Decode(data []byte, into runtime.Object) (runtime.Object, error) {
	core := &corev1.Event{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, core); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if into != nil {
		var ok bool
		if out, ok = into.(*unstructured.Unstructured); !ok {
			return nil, fmt.Errorf("an event cannot be decoded into %T", into)
		}
	}
	converted, err := json.Marshal(coreToEventsV1(core))
	if err != nil {
		return nil, err
	}
	return out, out.UnmarshalJSON(converted)
}

// Encode implements storage.Codec: an events.k8s.io/v1 event as the core/v1 event to store, in the
// bytes core/v1's codec writes for the same event, so that an update through either version that
// changes nothing is no write, as upstream's, whose two versions share one storage codec.
func (eventCodec) Encode(obj runtime.Object) ([]byte, error) {
	ev, err := typedEvent[eventsv1.Event](obj)
	if err != nil {
		return nil, err
	}
	core, err := typedToUnstructured(eventsV1ToCore(ev), corev1.SchemeGroupVersion.WithKind("Event"))
	if err != nil {
		return nil, err
	}
	return storage.UnstructuredJSON.Encode(core)
}

// typedEvent decodes an unstructured event into its Go type.
func typedEvent[T corev1.Event | eventsv1.Event](obj runtime.Object) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("an event cannot be encoded from %T", obj)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := new(T)
	return out, kjson.UnmarshalCaseSensitivePreserveInts(data, out)
}

// eventAsCore is an event of either version (as served by a Resource of group group) as core/v1,
// the form upstream validates (the internal Event's fields are core/v1's).
func eventAsCore(obj map[string]any, group string) (*corev1.Event, error) {
	u := &unstructured.Unstructured{Object: obj}
	if group == "" {
		return typedEvent[corev1.Event](u)
	}
	ev, err := typedEvent[eventsv1.Event](u)
	if err != nil {
		return nil, err
	}
	return eventsV1ToCore(ev), nil
}

// eventValidation validates the events of the version of group group, on create (old nil) and update;
// an events.k8s.io/v1 create has its metadata checked between the legacy and the strict checks.
//
// Mirrors ValidateEventCreate and ValidateEventUpdate (k8s.io/kubernetes pkg/apis/core/validation events.go).
func eventValidation(group string) func(obj, old map[string]any) field.ErrorList {
	return func(obj, old map[string]any) field.ErrorList {
		ev, err := eventAsCore(obj, group)
		if err != nil {
			return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
		}
		errs := legacyValidateEvent(ev, group)
		if group == "" {
			return errs
		}
		md := field.NewPath("metadata")
		if old == nil {
			errs = append(errs, apivalidation.ValidateObjectMetaAccessor(&unstructured.Unstructured{Object: obj}, true,
				apivalidation.NameIsDNSSubdomain, md)...)
			errs = append(errs, kubeFinalizerNames(ev.Finalizers, md)...)
			return append(errs, strictValidateEventCreate(ev)...)
		}
		prior, err := eventAsCore(old, group)
		if err != nil {
			return append(errs, field.Invalid(field.NewPath(""), "", err.Error()))
		}
		errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(&unstructured.Unstructured{Object: obj},
			&unstructured.Unstructured{Object: old}, md)...)
		errs = append(errs, kubeFinalizerNames(ev.Finalizers, md)...)
		return append(errs, strictValidateEventUpdate(ev, prior)...)
	}
}

// kubeFinalizerNames is the check core's ValidateObjectMeta and ValidateObjectMetaUpdate add to the
// generic ones: a finalizer without "/" must be a standard one (kubernetes, orphan,
// foregroundDeletion).
//
// Mirrors validateKubeFinalizerName (k8s.io/kubernetes pkg/apis/core/validation validation.go).
func kubeFinalizerNames(finalizers []string, md *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		switch {
		case strings.Contains(f, "/"), f == string(corev1.FinalizerKubernetes),
			f == metav1.FinalizerOrphanDependents, f == metav1.FinalizerDeleteDependents:
		default:
			errs = append(errs, field.Invalid(md.Child("finalizers").Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// legacyValidateEvent mirrors legacyValidateEvent (k8s.io/kubernetes pkg/apis/core/validation events.go).
func legacyValidateEvent(ev *corev1.Event, group string) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace")
	if ev.EventTime.IsZero() {
		if ns := ev.InvolvedObject.Namespace; (ns == "" && ev.Namespace != "" && ev.Namespace != metav1.NamespaceDefault) || (ns != "" && ns != ev.Namespace) {
			errs = append(errs, mismatch)
		}
		return errs
	}
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	controller := field.NewPath("reportingController")
	if group == "" {
		controller = field.NewPath("reportingComponent")
	}
	if ev.ReportingController == "" {
		errs = append(errs, field.Required(controller, ""))
	}
	for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
		errs = append(errs, field.Invalid(controller, ev.ReportingController, msg))
	}
	errs = append(errs, eventLength(field.NewPath("reportingInstance"), ev.ReportingInstance, eventReportingInstanceLimit, true)...)
	errs = append(errs, eventLength(field.NewPath("action"), ev.Action, eventActionLimit, true)...)
	errs = append(errs, eventLength(field.NewPath("reason"), ev.Reason, eventReasonLimit, true)...)
	return append(errs, eventLength(field.NewPath("message"), ev.Message, eventNoteLimit, false)...)
}

// eventLength is legacyValidateEvent's check of a field's presence (if required) and length.
func eventLength(path *field.Path, value string, limit int, required bool) field.ErrorList {
	var errs field.ErrorList
	if required && value == "" {
		errs = append(errs, field.Required(path, ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(path, "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}

// strictValidateEventCreate is the part of ValidateEventCreate for events.k8s.io/v1 and later
// (k8s.io/kubernetes pkg/apis/core/validation events.go); the generic checks cover the metadata.
func strictValidateEventCreate(ev *corev1.Event) field.ErrorList {
	errs := validateEventSeries(ev)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"firstTimestamp", !ev.FirstTimestamp.IsZero()}, {"lastTimestamp", !ev.LastTimestamp.IsZero()},
		{"count", ev.Count != 0}, {"source", ev.Source.Component != "" || ev.Source.Host != ""}} {
		if f.set {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", "needs to be unset"))
		}
	}
	return errs
}

// strictValidateEventUpdate is the part of ValidateEventUpdate for events.k8s.io/v1 and later
// (k8s.io/kubernetes pkg/apis/core/validation events.go): a new series is validated, the rest is
// immutable (eventTime to the microsecond).
func strictValidateEventUpdate(ev, old *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if !equalSeries(ev.Series, old.Series) {
		errs = append(errs, validateEventSeries(ev)...)
	}
	immutable := func(name string, a, b any) {
		errs = append(errs, apivalidation.ValidateImmutableField(a, b, field.NewPath(name))...)
	}
	immutable("involvedObject", internalReference(ev.InvolvedObject), internalReference(old.InvolvedObject))
	immutable("reason", ev.Reason, old.Reason)
	immutable("message", ev.Message, old.Message)
	immutable("source", internalEventSource(ev.Source), internalEventSource(old.Source))
	immutable("firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp)
	immutable("lastTimestamp", ev.LastTimestamp, old.LastTimestamp)
	immutable("count", ev.Count, old.Count) // upstream checks reason again here; its answer names it once
	immutable("type", ev.Type, old.Type)
	if !ev.EventTime.Truncate(time.Microsecond).Equal(old.EventTime.Truncate(time.Microsecond)) {
		immutable("eventTime", ev.EventTime, old.EventTime)
	}
	immutable("action", ev.Action, old.Action)
	immutable("related", internalRelated(ev.Related), internalRelated(old.Related))
	immutable("reportingController", ev.ReportingController, old.ReportingController)
	immutable("reportingInstance", ev.ReportingInstance, old.ReportingInstance)
	return errs
}

// internalEventSource and internalObjectReference have the shape of the internal EventSource and
// ObjectReference (k8s.io/kubernetes pkg/apis/core types.go): Go field names and no JSON tags, so
// that an immutable field's value prints in a 422 as upstream's, which validates internal types
// (`{"Component":"","Host":""}`).
type (
	internalEventSource     struct{ Component, Host string }
	internalObjectReference struct {
		Kind, Namespace, Name string
		UID                   types.UID
		APIVersion            string
		ResourceVersion       string
		FieldPath             string
	}
)

func internalReference(r corev1.ObjectReference) internalObjectReference {
	return internalObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID,
		APIVersion: r.APIVersion, ResourceVersion: r.ResourceVersion, FieldPath: r.FieldPath}
}

func internalRelated(r *corev1.ObjectReference) *internalObjectReference {
	if r == nil {
		return nil
	}
	out := internalReference(*r)
	return &out
}

// equalSeries says whether two series are the same.
func equalSeries(a, b *corev1.EventSeries) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Count == b.Count && a.LastObservedTime.Equal(&b.LastObservedTime)
}

// validateEventSeries mirrors validateV1EventSeries (k8s.io/kubernetes pkg/apis/core/validation events.go).
func validateEventSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series == nil {
		return nil
	}
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}
