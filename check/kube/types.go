package kube

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/listwatch/listwatch/check"
)

// History is what a Recorder recorded of one run against one resource in one namespace: every
// request with its answer, every watch with every frame it received. Times are nanoseconds from an
// origin shared by the whole history, from a monotonic clock.
type History struct {
	Resource Resource `json:"resource"`
	// Initial is the namespace's content when the run began, read by a consistent list: the
	// state the checker starts from (empty in a fresh namespace).
	Initial *ListResult `json:"initial,omitempty"`
	// Operations are the requests, in the order they were called.
	Operations []Operation `json:"operations,omitempty"`
	// Watches are the watch requests, in the order they were called.
	Watches []Watch `json:"watches,omitempty"`
	// Run describes the run that recorded the history; nil for a history written by hand.
	// Validate refuses one of another schema version.
	Run *check.Run `json:"run,omitempty"`
}

// Resource names what the history is about: a namespaced resource and the namespace of the run.
type Resource struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
}

// APIVersion is the resource's apiVersion: "v1" or "<group>/<version>".
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// String is group/version/resource in namespace.
func (r Resource) String() string {
	return fmt.Sprintf("%s/%s/%s in namespace %s", r.Group, r.Version, r.Resource, r.Namespace)
}

// Verb is the kind of a request.
type Verb string

// The verbs.
const (
	Create Verb = "create"
	Update Verb = "update"
	Delete Verb = "delete"
	Get    Verb = "get"
	List   Verb = "list"
)

// Operation is one request and its answer. Exactly one of Result, List, Error is set, or Unknown.
type Operation struct {
	Client int   `json:"client"`
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	Verb   Verb  `json:"verb"`
	// Name is the object's name (create, update, delete, get).
	Name string `json:"name,omitempty"`
	// Object is the body sent: create and update (its resourceVersion and uid are the update's
	// preconditions, as the apiserver reads them).
	Object *Object `json:"object,omitempty"`
	// Precondition is a delete's DeleteOptions.preconditions.
	Precondition *Precondition `json:"precondition,omitempty"`
	// Options are a get's or a list's query parameters.
	Options *ListOptions `json:"options,omitempty"`

	// Status is the HTTP status code; 0 when no answer came.
	Status int `json:"status,omitempty"`
	// Result is the object answered (create, update, get; delete when the server returns it).
	Result *Object `json:"result,omitempty"`
	// List is a list's answer.
	List *ListResult `json:"list,omitempty"`
	// Error is the Status of an answer other than 2xx.
	Error *Status `json:"error,omitempty"`
	// Unknown: no answer (a timeout, a broken connection): the request may or may not have
	// taken effect.
	Unknown bool `json:"unknown,omitempty"`
}

// Object is what the checker reads of an object: its identity, its resourceVersion and what the
// workload writes (labels and annotations).
type Object struct {
	Name            string            `json:"name"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	// InitialEventsEnd is a bookmark's k8s.io/initial-events-end annotation (bookmarks only).
	InitialEventsEnd bool `json:"initialEventsEnd,omitempty"`
}

// AnnotationPrefix starts the annotations the checker compares; a server may add its own.
const AnnotationPrefix = "check.listwatch.io/"

// WriteAnnotation names the write that made an object's state: "<client>-<seq>", unique in a run.
const WriteAnnotation = AnnotationPrefix + "write"

// same reports whether a and b are the same state of the same object: name, uid, resourceVersion,
// labels and the annotations under AnnotationPrefix.
func (o *Object) same(b *Object) bool {
	return o.Name == b.Name && o.UID == b.UID && o.ResourceVersion == b.ResourceVersion && o.sameContent(b)
}

// sameContent compares what a write sets: labels and the annotations under AnnotationPrefix.
func (o *Object) sameContent(b *Object) bool {
	return maps.Equal(nonEmpty(o.Labels), nonEmpty(b.Labels)) && maps.Equal(ours(o.Annotations), ours(b.Annotations))
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func ours(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, AnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// String is name@resourceVersion with the write annotation.
func (o *Object) String() string {
	if o == nil {
		return "<none>"
	}
	s := o.Name + "@" + o.ResourceVersion
	if w := o.Annotations[WriteAnnotation]; w != "" {
		s += " (" + w + ")"
	}
	return s
}

// Precondition is metav1.Preconditions.
type Precondition struct {
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// ListOptions are the metav1.ListOptions query parameters the workload sends, by their wire names.
// A nil SendInitialEvents is the parameter left out.
type ListOptions struct {
	ResourceVersion      string `json:"resourceVersion,omitempty"`
	ResourceVersionMatch string `json:"resourceVersionMatch,omitempty"`
	Limit                int64  `json:"limit,omitempty"`
	Continue             string `json:"continue,omitempty"`
	LabelSelector        string `json:"labelSelector,omitempty"`
	FieldSelector        string `json:"fieldSelector,omitempty"`
	SendInitialEvents    *bool  `json:"sendInitialEvents,omitempty"`
	AllowWatchBookmarks  bool   `json:"allowWatchBookmarks,omitempty"`
	TimeoutSeconds       int64  `json:"timeoutSeconds,omitempty"`
}

// The resourceVersionMatch values.
const (
	MatchExact        = "Exact"
	MatchNotOlderThan = "NotOlderThan"
)

// ListResult is a list's answer: its metadata and items.
type ListResult struct {
	ResourceVersion    string   `json:"resourceVersion"`
	Continue           string   `json:"continue,omitempty"`
	RemainingItemCount *int64   `json:"remainingItemCount,omitempty"`
	Items              []Object `json:"items,omitempty"`
}

// Status is what the checker reads of a metav1.Status.
type Status struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func (s *Status) String() string {
	if s == nil {
		return "<no status>"
	}
	return fmt.Sprintf("%d %s: %s", s.Code, s.Reason, s.Message)
}

// Watch is one watch request and every frame it received, in order.
type Watch struct {
	Client  int         `json:"client"`
	Call    int64       `json:"call"`
	Options ListOptions `json:"options"`
	// ResumedFrom is the index of the watch whose delivered resourceVersion this one starts from,
	// when it resumes one; nil otherwise.
	ResumedFrom *int `json:"resumedFrom,omitempty"`
	// Status is the HTTP status code of the answer; 0 when none came.
	Status int `json:"status,omitempty"`
	// Error is the Status of an answer other than 200.
	Error  *Status `json:"error,omitempty"`
	Frames []Frame `json:"frames,omitempty"`
	// End is when the stream ended, and EndReason how: "closed" (the server ended it), "stopped"
	// (the client did), or the transport error.
	End       int64  `json:"end"`
	EndReason string `json:"endReason,omitempty"`
}

// Frame is one watch event as received.
type Frame struct {
	Time   int64   `json:"time"`
	Type   string  `json:"type"`
	Object *Object `json:"object,omitempty"`
	// Status is an ERROR frame's object.
	Status *Status `json:"status,omitempty"`
}

// The watch event types.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
	Error    = "ERROR"
)

// The reasons of the stream ends.
const (
	EndClosed  = "closed"
	EndStopped = "stopped"
)

// Errors of this package; match them with errors.Is. The first three are package check's.
var (
	// ErrInvalidHistory: a history is malformed (the error names what is wrong).
	ErrInvalidHistory = check.ErrInvalidHistory
	// ErrViolation: a guarantee is broken (Result.Err).
	ErrViolation = check.ErrViolation
	// ErrInconclusive: the linearizability search timed out (Result.Err).
	ErrInconclusive = check.ErrInconclusive
	// ErrInvalidConfig: a workload Config or a resource is refused (the error names what).
	ErrInvalidConfig = errors.New("kube: invalid config")
)

// ReadJSON reads a history written by WriteJSON and validates it.
func ReadJSON(r io.Reader) (*History, error) { return check.ReadJSON[History](r) }

// IsHistory tells a Kubernetes API history in JSON (which names its resource at the top level)
// from package etcd's; it leaves r at its start. A file that is not JSON is not one: the etcd
// reader then says what is wrong.
func IsHistory(r io.ReadSeeker) bool {
	defer r.Seek(0, io.SeekStart)
	var top map[string]json.RawMessage
	if err := json.NewDecoder(bufio.NewReader(r)).Decode(&top); err != nil {
		return false
	}
	_, ok := top["resource"]
	return ok
}

// WriteJSON writes the history as indented JSON, the form ReadJSON reads.
func (h *History) WriteJSON(w io.Writer) error { return check.WriteJSON(w, h) }

// Validate checks that the history is well formed: known verbs, each operation with what its verb
// needs, times in order. Its errors
// wrap ErrInvalidHistory and name the first problem.
func (h *History) Validate() error {
	bad := func(format string, a ...any) error { return check.Invalid(ErrInvalidHistory, format, a...) }
	if h.Run != nil {
		if err := check.CheckSchema(h.Run.Schema); err != nil {
			return err
		}
	}
	if h.Resource.Resource == "" || h.Resource.Version == "" || h.Resource.Namespace == "" {
		return bad("resource: version, resource and namespace are required")
	}
	for i := range h.Operations {
		op := &h.Operations[i]
		where := func(format string, a ...any) error { return bad("operation %d: %s", i, fmt.Sprintf(format, a...)) }
		if op.Return < op.Call {
			return where("returned (%d) before it was called (%d)", op.Return, op.Call)
		}
		answers := 0
		for _, set := range []bool{op.Result != nil, op.List != nil, op.Error != nil, op.Unknown} {
			if set {
				answers++
			}
		}
		if answers > 1 {
			return where("more than one of result, list, error and unknown")
		}
		switch op.Verb {
		case Create, Update:
			if op.Object == nil || op.Name == "" || op.Object.Name != op.Name {
				return where("%s needs an object named like the operation", op.Verb)
			}
		case Delete, Get:
			if op.Name == "" {
				return where("%s needs a name", op.Verb)
			}
		case List:
			if op.Options == nil {
				return where("list needs options")
			}
			if op.Result != nil {
				return where("a list answers a list, not an object")
			}
		default:
			return where("unknown verb %q", op.Verb)
		}
		if op.Verb != List && op.List != nil {
			return where("only a list answers a list")
		}
	}
	for i := range h.Watches {
		w := &h.Watches[i]
		if w.ResumedFrom != nil && (*w.ResumedFrom < 0 || *w.ResumedFrom >= i) {
			return bad("watch %d: resumedFrom %d is not an earlier watch", i, *w.ResumedFrom)
		}
		last := w.Call
		for j, f := range w.Frames {
			if f.Time < last {
				return bad("watch %d frame %d: received before the previous frame or the call", i, j)
			}
			last = f.Time
			switch f.Type {
			case Added, Modified, Deleted, Bookmark:
				if f.Object == nil {
					return bad("watch %d frame %d: a %s frame needs an object", i, j, f.Type)
				}
			case Error:
				if f.Status == nil {
					return bad("watch %d frame %d: an ERROR frame needs a status", i, j)
				}
			default:
				return bad("watch %d frame %d: unknown event type %q", i, j, f.Type)
			}
		}
		if w.End < last {
			return bad("watch %d: ended before its last frame", i)
		}
	}
	return nil
}

// parseRV reads a resourceVersion as the apiserver's etcd3 storage does
// (k8s.io/apiserver pkg/storage/api_object_versioner.go ParseResourceVersion): a decimal uint64.
func parseRV(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty resourceVersion")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not a decimal number", s)
	}
	return v, nil
}

func rvString(v uint64) string { return strconv.FormatUint(v, 10) }

// sortedNames returns the keys of m in order.
func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
