package httpwatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Custom resources from CustomResourceDefinitions (apiextensions.k8s.io/v1), as a test or a
// controller's manifests define them: YAML or JSON files, or Go values of the upstream type.

// ErrInvalidCRD is wrapped by the errors of CRDResource and CRDResources for a document that is not
// a CustomResourceDefinition the server can serve.
var ErrInvalidCRD = errors.New("httpwatch: invalid CustomResourceDefinition")

// crd is the part of an apiextensions.k8s.io/v1 CustomResourceDefinition the server reads.
type crd struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Plural     string   `json:"plural"`
			Singular   string   `json:"singular"`
			Kind       string   `json:"kind"`
			ListKind   string   `json:"listKind"`
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Scope    string       `json:"scope"`
		Versions []crdVersion `json:"versions"`
	} `json:"spec"`
}

type crdVersion struct {
	Name    string `json:"name"`
	Served  bool   `json:"served"`
	Storage bool   `json:"storage"`
	Schema  *struct {
		OpenAPIV3Schema *spec.Schema `json:"openAPIV3Schema"`
	} `json:"schema"`
	Subresources *struct {
		Status *struct{} `json:"status"`
		Scale  *struct {
			SpecReplicasPath   string  `json:"specReplicasPath"`
			StatusReplicasPath string  `json:"statusReplicasPath"`
			LabelSelectorPath  *string `json:"labelSelectorPath"`
		} `json:"scale"`
	} `json:"subresources"`
	AdditionalPrinterColumns []struct {
		Name        string `json:"name"`
		Type        string `json:"type"`
		Format      string `json:"format"`
		Description string `json:"description"`
		Priority    int32  `json:"priority"`
		JSONPath    string `json:"jsonPath"`
	} `json:"additionalPrinterColumns"`
	SelectableFields []struct {
		JSONPath string `json:"jsonPath"`
	} `json:"selectableFields"`
}

// CRDResource returns the resource a CustomResourceDefinition defines. crd is the definition as
// YAML or JSON ([]byte or string), or a Go value that encodes to its JSON, such as a
// *k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.CustomResourceDefinition. The resource
// is the definition's storage version (the one served version, when no version says storage):
// its scope, names, status and scale subresources, printer columns, selectable fields and schema. Other
// versions are not served: the server has no conversion.
func CRDResource(crd any) (Resource, error) {
	var data []byte
	switch t := crd.(type) {
	case []byte:
		data = t
	case string:
		data = []byte(t)
	default:
		var err error
		if data, err = json.Marshal(crd); err != nil {
			return Resource{}, fmt.Errorf("%w: %v", ErrInvalidCRD, err)
		}
	}
	resources, err := CRDResources(data)
	if err != nil {
		return Resource{}, err
	}
	if len(resources) != 1 {
		return Resource{}, fmt.Errorf("%w: %d definitions where one was expected", ErrInvalidCRD, len(resources))
	}
	return resources[0], nil
}

// CRDResources returns the resources of every CustomResourceDefinition in a YAML stream (documents
// separated by ---) or JSON; documents of other kinds are an error, empty ones are skipped.
func CRDResources(data []byte) ([]Resource, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Resource
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF {
				break
			}
			return nil, fmt.Errorf("%w: document %d: %v", ErrInvalidCRD, i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		var c crd
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%w: document %d: %v", ErrInvalidCRD, i, err)
		}
		r, err := c.resource()
		if err != nil {
			return nil, fmt.Errorf("%w: document %d (%s): %v", ErrInvalidCRD, i, c.Metadata.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// resource checks what apiextensions' validation checks of the parts served, and makes the
// resource.
func (c *crd) resource() (Resource, error) {
	if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" {
		return Resource{}, fmt.Errorf("kind %q of %q, want CustomResourceDefinition of apiextensions.k8s.io/v1", c.Kind, c.APIVersion)
	}
	s := c.Spec
	if s.Group == "" || len(validation.IsDNS1123Subdomain(s.Group)) > 0 || !strings.Contains(s.Group, ".") {
		return Resource{}, fmt.Errorf("spec.group %q: a DNS subdomain with at least one dot is required", s.Group)
	}
	if s.Names.Plural == "" || s.Names.Kind == "" {
		return Resource{}, errors.New("spec.names.plural and spec.names.kind are required")
	}
	if want := s.Names.Plural + "." + s.Group; c.Metadata.Name != want {
		return Resource{}, fmt.Errorf("metadata.name %q must be spec.names.plural+\".\"+spec.group (%q)", c.Metadata.Name, want)
	}
	if s.Scope != "Namespaced" && s.Scope != "Cluster" {
		return Resource{}, fmt.Errorf("spec.scope %q: must be Namespaced or Cluster", s.Scope)
	}
	var v *crdVersion
	served := 0
	for i := range s.Versions {
		if s.Versions[i].Served {
			served++
			if v == nil || s.Versions[i].Storage {
				v = &s.Versions[i]
			}
		}
	}
	if v == nil {
		return Resource{}, errors.New("no served version in spec.versions")
	}
	r := Resource{
		Group: s.Group, Version: v.Name, Resource: s.Names.Plural, Kind: s.Names.Kind, ListKind: s.Names.ListKind,
		SingularName: s.Names.Singular, ShortNames: s.Names.ShortNames, Categories: s.Names.Categories,
		Namespaced: s.Scope == "Namespaced",
		// As apiextensions-apiserver keeps custom resources, under /registry/<group>/<resource>.
		KeyPrefix:         "/" + s.Group + "/" + s.Names.Plural,
		StatusSubresource: v.Subresources != nil && v.Subresources.Status != nil,
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		sc := v.Subresources.Scale
		r.Scale = &ScaleSubresource{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
		if sc.LabelSelectorPath != nil {
			r.Scale.LabelSelectorPath = *sc.LabelSelectorPath
		}
		if err := r.Scale.check(); err != nil {
			return Resource{}, err
		}
	}
	if v.Schema != nil {
		r.Schema = v.Schema.OpenAPIV3Schema
	}
	for _, col := range v.AdditionalPrinterColumns {
		r.Columns = append(r.Columns, Column{Name: col.Name, Type: col.Type, Format: col.Format,
			Description: col.Description, Priority: col.Priority, JSONPath: col.JSONPath})
	}
	for _, f := range v.SelectableFields {
		label := strings.TrimPrefix(f.JSONPath, ".")
		r.SelectableFields = append(r.SelectableFields, SelectableField{Label: label, Path: strings.Split(label, ".")})
	}
	// A schema that is not structural, or a printer column whose JSONPath does not parse, is
	// refused as apiextensions' CRD validation refuses them.
	if _, err := r.withSchemaAndColumns(); err != nil {
		return Resource{}, err
	}
	return r, nil
}
