package httpwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/kube-openapi/pkg/validation/spec"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/storage"
)

// The versions of a CustomResourceDefinition, as apiextensions-apiserver serves them: each served
// version is a Resource of its own (its schema, subresources, columns and selectable fields), and
// all of them keep their objects at one key prefix, stored at the storage version. Each version's
// storage decodes what is stored (whatever version it was written at) to its own version and
// encodes what it writes to the storage version, by the storage codec of the CRD handler: the
// stored version's schema prunes and defaults what is read, the conversion package converts it
// (strategy None rewrites apiVersion, Webhook calls the definition's webhook), the target
// version's schema prunes the result.

// crdKind is the kind of the definitions, as errors name it.
var crdKind = schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}

// crdVersions is what the served versions of one definition share.
type crdVersions struct {
	// definition is the definition as served: defaulted, with its stored versions.
	definition *apiextensionsv1.CustomResourceDefinition
	gk         schema.GroupKind
	// storage is the storage version; served the served versions, the storage version first.
	storage string
	served  []string
	// structural holds each version's structural schema with its defaults pruned (nil without one).
	structural map[string]*structuralschema.Structural
	// converter converts objects between the versions (it copies them first).
	converter runtime.ObjectConvertor
}

// crdDocument reads one document of CRDResources: its resources, and the definition's name as
// errors quote it.
func crdDocument(raw []byte) ([]Resource, string, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, "", err
	}
	if tm.APIVersion != "apiextensions.k8s.io/v1" || tm.Kind != "CustomResourceDefinition" {
		return nil, "", fmt.Errorf("kind %q of %q, want CustomResourceDefinition of apiextensions.k8s.io/v1", tm.Kind, tm.APIVersion)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(raw, crd); err != nil {
		return nil, "", err
	}
	name := " (" + crd.Name + ")"
	vs, err := newCRDVersions(crd)
	if err != nil {
		return nil, name, err
	}
	rs := make([]Resource, 0, len(vs.served))
	for _, v := range vs.served {
		r, err := vs.resource(v)
		if err != nil {
			return nil, name, err
		}
		rs = append(rs, r)
	}
	return rs, name, nil
}

// newCRDVersions defaults and validates a definition as the apiserver does when it is written, and
// builds what its versions share.
func newCRDVersions(crd *apiextensionsv1.CustomResourceDefinition) (*crdVersions, error) {
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	addStoredVersion(crd)
	internal := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		return nil, err
	}
	if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		return nil, apierrors.NewInvalid(crdKind, crd.Name, errs)
	}
	factory, err := converterFactory(crd)
	if err != nil {
		return nil, err
	}
	converter, _, err := factory.NewConverter(crd)
	if err != nil {
		return nil, err
	}
	vs := &crdVersions{definition: crd, gk: schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind},
		converter: converter, structural: map[string]*structuralschema.Structural{}}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			vs.storage = v.Name
		}
		if v.Served {
			vs.served = append(vs.served, v.Name)
		}
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if vs.structural[v.Name], err = prunedStructural(v.Schema.OpenAPIV3Schema); err != nil {
				return nil, err
			}
		}
	}
	if i := slices.Index(vs.served, vs.storage); i > 0 {
		vs.served = append(append([]string{vs.storage}, vs.served[:i]...), vs.served[i+1:]...)
	}
	return vs, nil
}

// converterFactory is the conversion package's factory for the definition's strategy: None needs
// no webhook machinery (the factory's zero value makes it); Webhook gets one of its own, whose
// client manager calls the webhook at clientConfig.url with the caBundle. A service clientConfig is
// refused: the server runs no cluster (no Services, Endpoints or cluster DNS) to resolve it.
//
// Mirrors NewCustomResourceDefinitionHandler's NewCRConverterFactory (apiextensions-apiserver customresource_handler.go).
func converterFactory(crd *apiextensionsv1.CustomResourceDefinition) (*conversion.CRConverterFactory, error) {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter {
		return &conversion.CRConverterFactory{}, nil
	}
	if c.Webhook != nil && c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil {
		svc := c.Webhook.ClientConfig.Service
		return nil, fmt.Errorf("spec.conversion.webhook.clientConfig.service %s/%s is not served: the server has no cluster "+
			"(no Services, Endpoints or cluster DNS) to resolve it; give spec.conversion.webhook.clientConfig.url", svc.Namespace, svc.Name)
	}
	// The service resolver is never asked (no service is accepted); the factory wants one.
	return conversion.NewCRConverterFactory(webhook.NewDefaultServiceResolver(), nil)
}

// addStoredVersion adds the storage version to status.storedVersions unless it is there, as the
// definitions' strategy does on every create and update; the definition's own stored versions (as
// a cluster's definition carries them) are kept.
//
// Mirrors strategy.PrepareForUpdate (apiextensions-apiserver pkg/registry/customresourcedefinition).
func addStoredVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

// prunedStructural is a version's structural schema with its defaults pruned.
func prunedStructural(s *apiextensionsv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		return nil, err
	}
	st, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	st = st.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(st); err != nil {
		return nil, err
	}
	return st, nil
}

// version returns the definition's version named name.
func (vs *crdVersions) version(name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range vs.definition.Spec.Versions {
		if vs.definition.Spec.Versions[i].Name == name {
			return &vs.definition.Spec.Versions[i]
		}
	}
	return nil
}

// resource is the Resource of the served version name.
func (vs *crdVersions) resource(name string) (Resource, error) {
	s := vs.definition.Spec
	v := vs.version(name)
	r := Resource{
		Group: s.Group, Version: v.Name, Resource: s.Names.Plural, Kind: s.Names.Kind, ListKind: s.Names.ListKind,
		SingularName: s.Names.Singular, ShortNames: s.Names.ShortNames, Categories: s.Names.Categories,
		Namespaced: s.Scope == apiextensionsv1.NamespaceScoped,
		// As apiextensions-apiserver keeps custom resources, under /registry/<group>/<resource>.
		KeyPrefix:          "/" + s.Group + "/" + s.Names.Plural,
		StatusSubresource:  v.Subresources != nil && v.Subresources.Status != nil,
		DeprecationWarning: vs.deprecationWarning(v),
		StoredVersions:     slices.Clone(vs.definition.Status.StoredVersions),
		crd:                vs,
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		sc := v.Subresources.Scale
		r.Scale = &ScaleSubresource{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
		if sc.LabelSelectorPath != nil {
			r.Scale.LabelSelectorPath = *sc.LabelSelectorPath
		}
	}
	if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
		data, err := json.Marshal(v.Schema.OpenAPIV3Schema)
		if err != nil {
			return Resource{}, err
		}
		r.Schema = &spec.Schema{}
		if err := json.Unmarshal(data, r.Schema); err != nil {
			return Resource{}, err
		}
	}
	for _, col := range v.AdditionalPrinterColumns {
		r.Columns = append(r.Columns, Column{Name: col.Name, Type: col.Type, Format: col.Format,
			Description: col.Description, Priority: col.Priority, JSONPath: col.JSONPath})
	}
	for _, f := range v.SelectableFields {
		label := strings.TrimPrefix(f.JSONPath, ".")
		r.SelectableFields = append(r.SelectableFields, SelectableField{Label: label, Path: strings.Split(label, ".")})
	}
	return r.withSchemaAndColumns()
}

// deprecationWarning is the Warning every request at a deprecated version carries; "" for a
// version that is not deprecated.
//
// Mirrors getOrCreateServingInfoFor's warnings and defaultDeprecationWarning (apiextensions-apiserver
// customresource_handler.go).
func (vs *crdVersions) deprecationWarning(v *apiextensionsv1.CustomResourceDefinitionVersion) string {
	if !v.Deprecated {
		return ""
	}
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	s := vs.definition.Spec
	msg := fmt.Sprintf("%s/%s %s is deprecated", s.Group, v.Name, s.Names.Kind)
	var newer []string
	for _, o := range s.Versions {
		if o.Served && !o.Deprecated && version.CompareKubeAwareVersionStrings(v.Name, o.Name) < 0 {
			newer = append(newer, o.Name)
		}
	}
	if len(newer) == 0 {
		return msg
	}
	slices.SortFunc(newer, func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) })
	return msg + fmt.Sprintf("; use %s/%s %s", s.Group, newer[0], s.Names.Kind)
}

// convert converts a custom resource to the version to, pruned by its schema.
//
// Mirrors schemaCoercingConverter.ConvertToVersion (apiextensions-apiserver customresource_handler.go).
func (vs *crdVersions) convert(u *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
	out, err := vs.converter.ConvertToVersion(u, schema.GroupVersion{Group: vs.gk.Group, Version: to})
	if err != nil {
		return nil, err
	}
	converted, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("conversion to %s gave a %T", to, out)
	}
	if _, err := vs.coerce(converted, false, false); err != nil {
		return nil, err
	}
	return converted, nil
}

// coerce prunes a custom resource by the schema of its own version and coerces its metadata,
// returning the unknown fields' paths when track is set; read from storage (stored), invalid
// metadata is dropped and a missing generation is 1.
func (vs *crdVersions) coerce(u *unstructured.Unstructured, stored, track bool) ([]string, error) {
	return coerceObject(u, vs.gk, func(v string) *structuralschema.Structural { return vs.structural[v] }, coerceOptions{track: track, stored: stored})
}

// defaults applies the defaults of the object's own version.
//
// Mirrors unstructuredDefaulter.Default (apiextensions-apiserver customresource_handler.go).
func (vs *crdVersions) defaults(u *unstructured.Unstructured) {
	gvk := u.GroupVersionKind()
	if gvk.GroupKind() != vs.gk {
		return
	}
	structuraldefaulting.Default(u.Object, vs.structural[gvk.Version])
}

// otherVersionStrictErrors reports, as fieldValidation says, the unknown and duplicate fields of a
// body at another version of the resource's definition, which is then refused for its version: the
// CRD handler's decoder prunes it by its own version's schema before the handlers compare the
// versions (Strict: the 400 of those fields comes first; Warn: a warning each).
//
// Mirrors handlers.createHandler and UpdateResource over schemaCoercingDecoder (apiextensions-apiserver).
func (h *resourceHandler) otherVersionStrictErrors(w http.ResponseWriter, body []byte, validation string) error {
	if !h.res.multiVersion() || !isStrict(validation) {
		return nil
	}
	actual, err := serializerjson.DefaultMetaFactory.Interpret(body)
	if err != nil || actual.Kind == "" || actual.Group != h.res.Group || actual.Version == h.res.Version || h.res.crd.version(actual.Version) == nil {
		return nil
	}
	content := map[string]any{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &content); err != nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: content}
	strictErrs := duplicateFields(body, true)
	unknown, err := h.res.crd.coerce(u, false, true)
	if err != nil {
		return nil
	}
	for _, path := range unknown {
		strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, path))
	}
	return h.strictDecodingErrors(w, u, body, validation, strictErrs)
}

// crdCodec is the storage codec of one version of a definition.
//
// Mirrors crdConversionRESTOptionsGetter's codec (apiextensions-apiserver customresource_handler.go):
// a versioning codec whose decoder coerces by the stored version's schema and defaults, and whose
// converter prunes by the target version's.
type crdCodec struct {
	vs      *crdVersions
	version string
}

var _ storage.Codec = crdCodec{}

// Decode implements storage.Codec: the stored object at the codec's version.
func (c crdCodec) Decode(data []byte, into runtime.Object) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	if _, err := c.vs.coerce(u, true, false); err != nil {
		return nil, err
	}
	c.vs.defaults(u)
	out, err := c.vs.convert(u, c.version)
	if err != nil {
		return nil, err
	}
	if into == nil {
		return out, nil
	}
	target, ok := into.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("a custom resource cannot be decoded into %T", into)
	}
	target.Object = out.Object
	return target, nil
}

// Encode implements storage.Codec: the object at the storage version.
func (c crdCodec) Encode(obj runtime.Object) ([]byte, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("a custom resource cannot be encoded from %T", obj)
	}
	out, err := c.vs.convert(u, c.vs.storage)
	if err != nil {
		return nil, err
	}
	return out.MarshalJSON()
}
