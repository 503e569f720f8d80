package httpwatch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/listwatch/listwatch/builtin"
	"github.com/listwatch/listwatch/storage"
)

// Resource describes one resource the server serves: where its paths are, what its objects are called
// and which of the registry behaviours that differ between built-in types and custom resources it
// follows.
type Resource struct {
	// Group is the API group; "" is the core group, served under /api.
	Group string
	// Version is the one served version, such as "v1".
	Version string
	// Resource is the plural lower-case name used in paths, such as "configmaps".
	Resource string
	// Kind is the kind of one object, such as "ConfigMap".
	Kind string
	// ListKind is the kind of a list; default Kind+"List".
	ListKind string
	// SingularName is shown in discovery; default the lower-case Kind.
	SingularName string
	// ShortNames are shown in discovery.
	ShortNames []string
	// Namespaced says objects live in namespaces (/namespaces/<ns>/<resource>/<name>).
	Namespaced bool
	// BuiltIn makes the resource behave like a compiled-in type rather than a custom resource: a request
	// body may omit apiVersion and kind, list items are served without them, an unknown field label is
	// refused with runtime.DefaultMetaV1FieldSelectorConversion's message, and metadata.generation is
	// left alone. Custom resources (BuiltIn false) follow apiextensions-apiserver: kind is required,
	// a kind or apiVersion other than the resource's is a 422, generation starts at 1 and grows with
	// every change outside metadata. A built-in resource whose kind package builtin has (ConfigMap,
	// Secret, Pod, Service, Namespace, Deployment) is typed: its bodies pass through the Go type
	// (protobuf, fieldValidation, strategic merge patch, the structured-merge-diff schema for apply).
	BuiltIn bool
	// AllowUnconditionalUpdate lets a PUT without metadata.resourceVersion overwrite the stored object,
	// as most built-in strategies do; custom resources refuse it with a 422.
	AllowUnconditionalUpdate bool
	// ReturnDeletedObject makes DELETE answer with the deleted object instead of a Success Status.
	ReturnDeletedObject bool
	// SelectableFields are the field labels a fieldSelector may use besides metadata.name and (for
	// namespaced resources) metadata.namespace.
	SelectableFields []SelectableField
	// KeyPrefix is the storage key prefix of the resource; default "/"+Resource, so objects are kept at
	// /registry/<resource>/<namespace>/<name>.
	KeyPrefix string
	// TriggerField is a selectable field the watch cache indexes watchers by, as pods are indexed by
	// spec.nodeName; "" for none. Every list and watch predicate of the resource names it in
	// IndexFields.
	TriggerField string
	// Categories are shown in discovery; `kubectl get all` gets the resources in "all".
	Categories []string
	// StatusSubresource serves <resource>/status (get, update, patch), which changes the status
	// alone, while updates of the resource itself keep the stored status.
	StatusSubresource bool
	// Scale, if set, serves <resource>/scale (get, update, patch) of a custom resource: an
	// autoscaling/v1 Scale read from and written to the paths it names.
	Scale *ScaleSubresource
	// Columns are the columns of the Table `kubectl get` shows after Name. Nil: a custom resource
	// shows Age, as a CRD without additionalPrinterColumns; a built-in kind its printer's columns,
	// or Created At (the default table convertor) if it has none.
	Columns []Column
	// Schema is the OpenAPI v3 schema of a custom resource's objects (a CRD version's
	// openAPIV3Schema), published in /openapi/v3 and /openapi/v2. Nil: any object, its fields
	// preserved.
	Schema *spec.Schema
	// DeprecationWarning, if set, is the Warning header (code 299) every request of a custom
	// resource carries, as a deprecated CRD version's do.
	DeprecationWarning string
	// StoredVersions are a custom resource's status.storedVersions: the versions its objects may be
	// stored at (CRDResources: the definition's own, and its storage version).
	StoredVersions []string

	// crd is what the versions of a custom resource's definition share (CRDResources); nil for
	// a resource configured otherwise, which serves its one version.
	crd *crdVersions
	// strategy holds what a built-in kind's registry strategy does beyond the generic one.
	strategy *strategy
	// custom is a custom resource's schema machinery (pruning, defaulting, validation), set by
	// withDefaults; nil for built-in resources.
	custom *customResource
	// scaleTable converts Scales to Tables (the scale subresource's Desired, Available and Age
	// columns); set by withDefaults when Scale is.
	scaleTable *columnTable
	// table converts to Tables by JSONPath columns (a custom resource's, or a built-in resource's
	// Columns without a printer), set by withDefaults; nil: the built-in printer's columns.
	table *columnTable
}

// Column is a column of the Table a `kubectl get` shows.
//
// Mirrors apiextensions v1 CustomResourceColumnDefinition.
type Column struct {
	// Name, Type ("string", "integer", "number", "boolean", "date"), Format, Description and
	// Priority (0: shown by default; more: only with -o wide) are the column's definition.
	Name        string
	Type        string
	Format      string
	Description string
	Priority    int32
	// JSONPath is where the value is in the object, in kubectl's JSONPath syntax without the braces,
	// such as .spec.size or .status.conditions[?(@.type=="Ready")].status.
	JSONPath string

	// value computes a built-in printer's cell; nil for a JSONPath column.
	value func(obj map[string]any, now time.Time) any
}

// ScaleSubresource says where a custom resource or a built-in kind keeps what its scale
// subresource shows: each path is a JSONPath of field names, such as .spec.replicas.
//
// Mirrors apiextensions v1 CustomResourceSubresourceScale.
type ScaleSubresource struct {
	// SpecReplicasPath is the desired replicas (Scale's spec.replicas), under .spec; required.
	SpecReplicasPath string
	// StatusReplicasPath is the observed replicas (Scale's status.replicas), under .status;
	// required.
	StatusReplicasPath string
	// LabelSelectorPath, if set, is the serialized label selector (Scale's status.selector),
	// under .spec or .status; of a built-in kind, its metav1.LabelSelector, shown in its string form.
	LabelSelectorPath string
	// typed is the scale of a built-in kind (set for a BuiltIn resource), as its registry's
	// ScaleREST serves it: missing replicas are 0, a write is validated as a Scale.
	typed bool
}

// SelectableField is a field label a field selector may use, and where its value is in an object.
type SelectableField struct {
	// Label is the field label, such as "status.phase".
	Label string
	// Path is the field's path in the object, such as ["status", "phase"]. Strings, booleans and numbers
	// are matched by their text; a missing field is "".
	Path []string
	// Fallback, if set, is where the value is when Path's is "", as an event's source falls back
	// to its reportingComponent.
	Fallback []string
}

// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("httpwatch: invalid config")

// withDefaults fills in the derived fields and checks the rest.
func (r Resource) withDefaults() (Resource, error) {
	bad := func(format string, args ...any) (Resource, error) {
		return r, fmt.Errorf("%w: resource %q: %s", ErrInvalidConfig, r.Resource, fmt.Sprintf(format, args...))
	}
	if r.Resource == "" || strings.ContainsAny(r.Resource, "/ ") || r.Resource != strings.ToLower(r.Resource) {
		return bad("the resource name must be a non-empty lower-case path segment")
	}
	if (r.Resource == "namespaces" && r.Namespaced) || r.Resource == "watch" || r.Resource == "proxy" {
		// A cluster-scoped "namespaces" is the namespaces resource: its items are the namespaces
		// of the other resources' paths.
		return bad("the name is reserved in paths")
	}
	if r.Version == "" || strings.Contains(r.Version, "/") {
		return bad("a version is required")
	}
	if strings.Contains(r.Group, "/") {
		return bad("invalid group %q", r.Group)
	}
	if r.Kind == "" {
		return bad("a kind is required")
	}
	if r.ListKind == "" {
		r.ListKind = r.Kind + "List"
	}
	if r.SingularName == "" {
		r.SingularName = strings.ToLower(r.Kind)
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = "/" + r.Resource
	}
	if !strings.HasPrefix(r.KeyPrefix, "/") || strings.HasSuffix(r.KeyPrefix, "/") {
		return bad("the key prefix %q must start and not end with /", r.KeyPrefix)
	}
	for _, f := range r.SelectableFields {
		if f.Label == "" || len(f.Path) == 0 {
			return bad("a selectable field needs a label and a path")
		}
	}
	if r.Scale != nil {
		scale, err := r.scale()
		if err != nil {
			return bad("%v", err)
		}
		r.Scale = scale
	}
	if r.TriggerField != "" && r.selectableField(r.TriggerField) == nil {
		return bad("the trigger field %q is not a selectable field", r.TriggerField)
	}
	return r.withSchemaAndColumns()
}

// scale is the resource's scale subresource as served: a custom resource's if the CRD validation
// takes its paths, a built-in kind's marked typed; another built-in resource has none.
func (r Resource) scale() (*ScaleSubresource, error) {
	switch {
	case r.BuiltIn && !r.typed():
		return nil, errors.New("only a custom resource or a built-in kind has a scale subresource here")
	case r.BuiltIn:
		scale := *r.Scale
		scale.typed = true
		return &scale, nil
	}
	return r.Scale, r.Scale.check()
}

// withSchemaAndColumns builds a custom resource's schema machinery and the table convertor of
// JSONPath columns.
func (r Resource) withSchemaAndColumns() (Resource, error) {
	if !r.BuiltIn {
		custom, err := newCustomResource(r)
		if err != nil {
			return r, fmt.Errorf("%w: resource %q: %v", ErrInvalidConfig, r.Resource, err)
		}
		r.custom = custom
	}
	if r.Scale != nil && !r.BuiltIn {
		table, err := newColumnTable(scaleColumns())
		if err != nil {
			return r, fmt.Errorf("%w: resource %q: %v", ErrInvalidConfig, r.Resource, err)
		}
		r.scaleTable = table
	}
	cols := r.Columns
	if cols == nil && !r.BuiltIn {
		cols = defaultCustomColumns()
	}
	if cols != nil {
		table, err := newColumnTable(cols)
		if err != nil {
			return r, fmt.Errorf("%w: resource %q: %v", ErrInvalidConfig, r.Resource, err)
		}
		r.table = table
	}
	return r, nil
}

func (r Resource) selectableField(label string) *SelectableField {
	for i := range r.SelectableFields {
		if r.SelectableFields[i].Label == label {
			return &r.SelectableFields[i]
		}
	}
	return nil
}

// GroupVersion returns the resource's group and version.
func (r Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupVersionKind returns the kind of one object.
func (r Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion().WithKind(r.Kind)
}

// GroupResource names the resource in errors, as in `configmaps "x" not found`.
func (r Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Resource}
}

// ResourcePrefix is the storage key prefix of the resource: KeyPrefix with its default, such as
// "/configmaps". The assembler (package chain) builds the resource's storage under it.
func (r Resource) ResourcePrefix() string {
	if r.KeyPrefix != "" {
		return r.KeyPrefix
	}
	return "/" + r.Resource
}

// StorageCodec returns the codec of the resource's storage: for a version of a definition with
// several (CRDResources), one that decodes stored objects to the resource's version and encodes
// them at the storage version; for events.k8s.io/v1 events, one converting to and from the core/v1
// events stored; nil (storage.UnstructuredJSON) otherwise. The assembler (package chain) builds
// the resource's storage with it.
func (r Resource) StorageCodec() storage.Codec {
	if r.strategy != nil && r.strategy.codec != nil {
		return r.strategy.codec
	}
	if !r.multiVersion() {
		return nil
	}
	return crdCodec{vs: r.crd, version: r.Version}
}

// multiVersion says whether the resource is a version of a definition with several.
func (r Resource) multiVersion() bool {
	return r.crd != nil && len(r.crd.definition.Spec.Versions) >= 2
}

// NewObject returns an empty object of the resource's kind: what a BOOKMARK carries, so that every
// watch event decodes (client-go's unstructured decoder refuses an object without kind). A built-in
// kind's is its typed zero value as JSON shows it (an event's `"involvedObject": {}`), as
// upstream's bookmark is the storage's new internal object converted to the version (a
// deployment's `"replicas": 0`: strategy.internalZero).
func (r Resource) NewObject() runtime.Object {
	if r.typed() {
		// A served built-in kind is one of builtin's, so its zero value always converts.
		if u, err := typedZero(r.GroupVersionKind()); err == nil {
			if r.strategy != nil && r.strategy.internalZero != nil {
				r.strategy.internalZero(u.Object)
			}
			return u
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.GroupVersionKind())
	return u
}

// NewListObject returns an empty list of the resource's list kind.
func (r Resource) NewListObject() runtime.Object {
	listKind := r.ListKind
	if listKind == "" {
		listKind = r.Kind + "List"
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(r.GroupVersion().WithKind(listKind))
	return l
}

// KeyFunc returns the storage key of obj: ResourcePrefix, then the namespace of a namespaced
// resource, then the name, as a watch cache keys its objects.
func (r Resource) KeyFunc(obj runtime.Object) (string, error) {
	prefix := r.ResourcePrefix() + "/"
	if r.Namespaced {
		return storage.NamespaceKeyFunc(prefix, obj)
	}
	return storage.NoNamespaceKeyFunc(prefix, obj)
}

// TriggerValue returns the value of TriggerField in obj, which a watch cache indexes watchers by;
// "" when the resource has no trigger field.
func (r Resource) TriggerValue(obj runtime.Object) string {
	f := r.selectableField(r.TriggerField)
	if f == nil {
		return ""
	}
	return fieldText(contentOf(obj), f.Path)
}

// GetAttrs returns the label set and the field set a field selector matches against: metadata.name,
// metadata.namespace for namespaced resources (as storage.DefaultNamespaceScopedAttr and
// DefaultClusterScopedAttr), and the SelectableFields. It is the Predicate.GetAttrs of every list and
// watch the server makes, so a Cacher must be configured with it too.
func (r Resource) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	fs := fields.Set{"metadata.name": m.GetName()}
	if r.Namespaced {
		fs["metadata.namespace"] = m.GetNamespace()
	}
	if len(r.SelectableFields) > 0 {
		content := contentOf(obj)
		for _, f := range r.SelectableFields {
			v := fieldText(content, f.Path)
			if v == "" && f.Fallback != nil {
				v = fieldText(content, f.Fallback)
			}
			fs[f.Label] = v
		}
	}
	return labels.Set(m.GetLabels()), fs, nil
}

// contentOf returns the JSON-like content of an unstructured object, or nil.
func contentOf(obj runtime.Object) map[string]any {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent()
	}
	if co, ok := obj.(runtime.CacheableObject); ok {
		return contentOf(co.GetObject())
	}
	return nil
}

func fieldText(content map[string]any, path []string) string {
	v, found, err := unstructured.NestedFieldNoCopy(content, path...)
	if err != nil || !found || v == nil {
		return ""
	}
	switch t := v.(type) {
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64)
	default:
		return fmt.Sprint(t)
	}
}

// convertFieldLabel checks one field selector term, as the scope's Convertor.ConvertFieldLabel does:
// runtime.DefaultMetaV1FieldSelectorConversion for built-in types, crConverter.ConvertFieldLabel of
// apiextensions-apiserver for custom resources.
func (r Resource) convertFieldLabel(label, value string) (string, string, error) {
	if r.selectableField(label) != nil {
		return label, value, nil
	}
	if r.BuiltIn {
		if len(r.SelectableFields) > 0 {
			// Types with their own field labels (pods) answer as their generated conversion does.
			switch label {
			case "metadata.name", "metadata.namespace":
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}
		return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
	}
	switch label {
	case "metadata.name", "metadata.namespace":
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// typed reports whether the resource's objects have a Go type in package builtin: bodies and
// responses may be protobuf, unknown fields are found, and strategic merge patch applies.
func (r Resource) typed() bool { return r.BuiltIn && builtin.IsBuiltIn(r.GroupVersionKind()) }

// verbs are the verbs of the resource, as the apiserver's installer lists them.
var resourceVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// statusVerbs are the verbs of a status subresource.
// customResourceVerbs are a CRD's resource's verbs as apiextensions-apiserver's discovery
// controller lists them (customresource_discovery_controller.go).
var customResourceVerbs = metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

var statusVerbs = metav1.Verbs{"get", "patch", "update"}

// apiResources are the resource's entries in an APIResourceList: itself and its status and scale
// subresources.
func (r Resource) apiResources() []metav1.APIResource {
	out := []metav1.APIResource{{
		Name:         r.Resource,
		SingularName: r.SingularName,
		Namespaced:   r.Namespaced,
		Kind:         r.Kind,
		Verbs:        resourceVerbs,
		ShortNames:   r.ShortNames,
		Categories:   r.Categories,
	}}
	if r.crd != nil {
		// As apiextensions' discovery controller lists a CRD's resource: its verbs in its order,
		// the hash of the storage version.
		out[0].Verbs = customResourceVerbs
		out[0].StorageVersionHash = discovery.StorageVersionHash(r.Group, r.crd.storage, r.Kind)
	}
	if r.isCoreNamespaces() {
		out = append(out, metav1.APIResource{Name: r.Resource + "/finalize", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: metav1.Verbs{"update"}})
	}
	if r.StatusSubresource {
		out = append(out, metav1.APIResource{Name: r.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: statusVerbs})
	}
	if r.Scale != nil {
		out = append(out, metav1.APIResource{Name: r.Resource + "/scale", Namespaced: r.Namespaced,
			Group: scaleGVK.Group, Version: scaleGVK.Version, Kind: scaleGVK.Kind, Verbs: statusVerbs})
	}
	if r.BuiltIn {
		// The installer registers a built-in kind's paths sorted (deployments/scale before
		// deployments/status); the CRD handler lists status, then scale.
		slices.SortStableFunc(out[1:], func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// isCoreNamespaces reports whether the resource is core/v1 namespaces, whose items have the
// finalize subresource.
func (r Resource) isCoreNamespaces() bool {
	return r.BuiltIn && r.Group == "" && r.Resource == "namespaces" && !r.Namespaced
}
