package builtin

import (
	_ "embed"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// schemaYAML is the structured-merge-diff schema of Kinds: every type they reach, as
// k8s.io/client-go v0.37.2 applyconfigurations/internal holds it for all built-in types.
// TestSchemaMatchesClientGo in the interop module regenerates it (-update) and checks it.
//
//go:embed schema.yaml
var schemaYAML string

var (
	parserOnce sync.Once
	parser     *typed.Parser
	parserErr  error
)

// Parser returns the structured-merge-diff parser of the built-in types, named by their OpenAPI
// definition names (io.k8s.api.core.v1.Pod). It is parsed on first use.
func Parser() (*typed.Parser, error) {
	parserOnce.Do(func() {
		parser, parserErr = typed.NewParser(typed.YAMLObject(schemaYAML))
		if parserErr != nil {
			parserErr = fmt.Errorf("builtin: parsing the embedded schema: %w", parserErr)
		}
	})
	return parser, parserErr
}

// TypeConverter returns the managedfields.TypeConverter of the built-in types: server-side apply and
// managedFields tracking use it, as the apiserver's over its generated OpenAPI models. It converts
// both typed and unstructured objects.
func TypeConverter() (managedfields.TypeConverter, error) {
	p, err := Parser()
	if err != nil {
		return nil, err
	}
	return managedfields.NewSchemeTypeConverter(Scheme(), p), nil
}
