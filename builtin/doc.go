// Package builtin holds the built-in Kubernetes types listwatch serves as typed objects: core/v1
// ConfigMap, Namespace, Pod, Secret, Service and Event, apps/v1 Deployment and events.k8s.io/v1
// Event, as k8s.io/api v0.37.2
// defines them. It gives the HTTP API (package httpwatch) what the apiserver's legacy scheme gives
// its handlers: the scheme and its codecs (JSON, YAML, protobuf), the structured-merge-diff schema
// server-side apply and managedFields need, and the OpenAPI definitions of /openapi/v2 and
// /openapi/v3.
//
// # API
//
//   - Kinds lists the built-in kinds; IsBuiltIn tells one.
//   - Scheme and Codecs are the scheme and its serializer factory; New and ToTyped make typed
//     objects. Both are built on first use, so that a server pays for them only when a request
//     needs a typed object.
//   - Parser and TypeConverter are the structured-merge-diff schema of Kinds (every type they
//     reach), embedded from k8s.io/client-go's applyconfigurations/internal: the cheapest faithful
//     source, as k8s.io/api ships no OpenAPI and client-go's generated schema is what its typed
//     apply clients and fake clientset merge with.
//   - Definitions and DefinitionName are the OpenAPI definitions of Kinds, their lists, autoscaling/v1
//     Scale (the kind of custom resources' scale subresource) and what they
//     reach, derived from the Go types (names, types, SwaggerDoc descriptions, the OpenAPISchemaType
//     of special types, patchStrategy and patchMergeKey tags) and the structured-merge-diff schema
//     (list and map types), for v2 (#/definitions/) or v3 (#/components/schemas/).
//
// # Invariants
//
//   - The embedded schema is the part of client-go v0.37.2's schema that Kinds reach, type for
//     type (interop TestSchemaMatchesClientGo), and parses (TestTypeConverter).
//   - Every kind of Kinds converts to and from its structured-merge-diff typed value, unstructured
//     or typed, and a field of the wrong type is refused (TestTypeConverter, TestToTyped).
//   - Every kind and list definition names its group-version-kind, every reference resolves, and
//     the patch strategies, merge keys and list types are the Go types' and the schema's
//     (TestDefinitions).
package builtin
