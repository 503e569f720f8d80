package httpwatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Custom resources from CustomResourceDefinitions (apiextensions.k8s.io/v1), as a test or a
// controller's manifests define them: YAML or JSON files, or Go values of the upstream type.

// ErrInvalidCRD is wrapped by the errors of CRDResource and CRDResources for a document that is not
// a CustomResourceDefinition the server can serve.
var ErrInvalidCRD = errors.New("httpwatch: invalid CustomResourceDefinition")

// CRDResource returns the resource a CustomResourceDefinition defines. crd is the definition as
// YAML or JSON ([]byte or string), or a Go value that encodes to its JSON, such as a
// *k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.CustomResourceDefinition. The resource
// is the definition's storage version (its first served version when the storage version is not
// served): its scope, names, status and scale subresources, printer columns, selectable fields and
// schema. CRDResources gives every served version of a definition with several.
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
	if len(resources) == 0 || resources[0].crd == nil || len(resources) != len(resources[0].crd.served) {
		return Resource{}, fmt.Errorf("%w: %d resources where one definition was expected", ErrInvalidCRD, len(resources))
	}
	return resources[0], nil
}

// CRDResources returns the resources of every CustomResourceDefinition in a YAML stream (documents
// separated by ---) or JSON, one per served version, the storage version first; documents of other
// kinds are an error, empty ones are skipped. The versions of a definition share its storage: each
// reads and writes objects stored at the storage version, converted as apiextensions-apiserver's
// None or Webhook strategy converts them. A definition is validated as the apiserver validates one
// it is sent (ValidateCustomResourceDefinition, with its messages); a conversion webhook named by
// service is refused (only clientConfig.url is called).
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
		rs, name, err := crdDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: document %d%s: %v", ErrInvalidCRD, i, name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}
