package httpwatch

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/listwatch/listwatch/builtin"
)

// The OpenAPI documents of the served resources, as kube-apiserver publishes them: /openapi/v3
// lists one document per group version (/openapi/v3/api/v1, /openapi/v3/apis/<group>/<version>,
// served by k8s.io/kube-openapi's handler3, as the apiserver does), /openapi/v2 is one Swagger 2.0
// document, in JSON or in the protobuf kubectl and client-go ask for. Each operation names its
// kind (x-kubernetes-group-version-kind) and action, PATCH lists the patch types it accepts, and
// writes take fieldValidation: what kubectl reads to decide how to validate and how to compute
// `kubectl apply`'s patch. Schemas of built-in kinds come from package builtin; a custom
// resource's is its Resource.Schema (any object when nil) with metadata as ObjectMeta.

// openAPI holds the documents, built on first request.
type openAPI struct {
	server *Server
	v3     *handler3.OpenAPIService
	gvs    map[string]bool // "api/v1", "apis/<group>/<version>"

	v2Once  sync.Once
	v2JSON  []byte
	v2Proto []byte
	v2Err   error
}

func newOpenAPI(s *Server) *openAPI {
	o := &openAPI{server: s, v3: handler3.NewOpenAPIService(), gvs: map[string]bool{}}
	for gv := range s.resources {
		gv := gv
		path := gvPath(gv)
		o.gvs[path] = true
		o.v3.UpdateGroupVersionLazy(path, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := o.v3Document(gv)
			if err != nil {
				return nil, "", err
			}
			data, err := json.Marshal(doc)
			if err != nil {
				return nil, "", err
			}
			return doc, etag(data), nil
		})))
	}
	return o
}

func gvPath(gv groupVersion) string {
	if gv.group == "" {
		return "api/" + gv.version
	}
	return "apis/" + gv.group + "/" + gv.version
}

// serve answers /openapi/v2, /openapi/v3 and /openapi/v3/<group version>.
func (o *openAPI) serve(w http.ResponseWriter, req *http.Request, parts []string) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		o.server.writeError(w, req, methodNotAllowed())
		return
	}
	switch {
	case len(parts) == 2 && parts[1] == "v2":
		o.serveV2(w, req)
	case len(parts) == 2 && parts[1] == "v3":
		o.v3.HandleDiscovery(w, req)
	case len(parts) > 2 && parts[1] == "v3" && o.gvs[strings.Join(parts[2:], "/")]:
		o.v3.HandleGroupVersion(w, req)
	default:
		http.NotFound(w, req)
	}
}

const mimePb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

// serveV2 answers /openapi/v2 in JSON or protobuf, as kube-openapi's handler does.
func (o *openAPI) serveV2(w http.ResponseWriter, req *http.Request) {
	o.v2Once.Do(func() {
		doc, err := o.v2Document()
		if err != nil {
			o.v2Err = err
			return
		}
		if o.v2JSON, err = json.Marshal(doc); err != nil {
			o.v2Err = err
			return
		}
		parsed, err := openapi_v2.ParseDocument(o.v2JSON)
		if err != nil {
			o.v2Err = err
			return
		}
		o.v2Proto, o.v2Err = proto.Marshal(parsed)
	})
	if o.v2Err != nil {
		o.server.writeError(w, req, o.v2Err)
		return
	}
	accept := req.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	for _, clause := range goautoneg.ParseAccept(accept) {
		switch {
		case clause.Type == "application" && clause.SubType == "com.github.proto-openapi.spec.v2@v1.0+protobuf",
			clause.Type == "application" && clause.SubType == "com.github.proto-openapi.spec.v2.v1.0+protobuf":
			w.Header().Set("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
			w.Header().Set("Etag", `"`+etag(o.v2Proto)+`"`)
			w.Write(o.v2Proto)
			return
		case (clause.Type == "application" || clause.Type == "*") && (clause.SubType == "json" || clause.SubType == "*"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Etag", `"`+etag(o.v2JSON)+`"`)
			w.Write(o.v2JSON)
			return
		}
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

// etag is a hash of a document, as kube-openapi's handlers compute one.
func etag(data []byte) string {
	return fmt.Sprintf("%X", sha512.Sum512(data))
}

// definitions are the schemas of the served resources: the built-in kinds and what they reach,
// and one per custom resource (and list) of the group version gv, or of all when gv is nil.
func (o *openAPI) definitions(v3 bool, only *groupVersion) (map[string]spec.Schema, error) {
	base, err := builtin.Definitions(v3)
	if err != nil {
		return nil, err
	}
	defs := make(map[string]spec.Schema, len(base))
	for k, v := range base {
		defs[k] = v
	}
	prefix := "#/definitions/"
	if v3 {
		prefix = "#/components/schemas/"
	}
	for gv, handlers := range o.server.resources {
		if only != nil && gv != *only {
			continue
		}
		for _, h := range handlers {
			if h.res.typed() {
				continue
			}
			name, listName := customDefinitionNames(h.res)
			defs[name] = customSchema(h.res, prefix, v3)
			list := spec.Schema{SchemaProps: spec.SchemaProps{
				Type:     []string{"object"},
				Required: []string{"items"},
				Properties: map[string]spec.Schema{
					"apiVersion": {SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
					"kind":       {SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
					"metadata":   refSchema(prefix+"io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", v3),
					"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"},
						Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(prefix + name)}}}}},
				},
			}}
			list.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": h.res.Group, "version": h.res.Version, "kind": h.res.ListKind}})
			defs[listName] = list
		}
	}
	return defs, nil
}

// customDefinitionNames mirror apiextensions-apiserver's builder: the reversed group, the version
// and the kind.
func customDefinitionNames(r Resource) (string, string) {
	parts := strings.Split(r.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	base := strings.Join(parts, ".") + "." + r.Version + "."
	return base + r.Kind, base + r.ListKind
}

func refSchema(ref string, v3 bool) spec.Schema {
	if v3 {
		return spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(ref)}}}}}
	}
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(ref)}}
}

// customSchema is a custom resource's schema with apiVersion, kind and metadata as the CRD
// builder adds them; without Resource.Schema, any object.
func customSchema(r Resource, prefix string, v3 bool) spec.Schema {
	var s spec.Schema
	if r.Schema != nil {
		s = *r.Schema
	} else {
		s.Type = []string{"object"}
		s.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	}
	props := make(map[string]spec.Schema, len(s.Properties)+3)
	for k, v := range s.Properties {
		props[k] = v
	}
	props["apiVersion"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}
	props["kind"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}
	props["metadata"] = refSchema(prefix+"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", v3)
	s.Properties = props
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": r.Group, "version": r.Version, "kind": r.Kind}})
	return s
}

// reachable keeps the definitions the roots reach through references.
func reachable(defs map[string]spec.Schema, prefix string, roots []string) map[string]*spec.Schema {
	out := map[string]*spec.Schema{}
	var visit func(name string)
	var walk func(s *spec.Schema)
	walk = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if ref := s.Ref.String(); ref != "" {
			visit(strings.TrimPrefix(ref, prefix))
		}
		for k := range s.Properties {
			p := s.Properties[k]
			walk(&p)
		}
		for i := range s.AllOf {
			walk(&s.AllOf[i])
		}
		if s.Items != nil {
			walk(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
	}
	visit = func(name string) {
		if _, done := out[name]; done {
			return
		}
		d, ok := defs[name]
		if !ok {
			return
		}
		out[name] = &d
		walk(&d)
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

// definitionNames are the definitions of a resource's kind and list.
func definitionNames(r Resource) (string, string, error) {
	if !r.typed() {
		n, l := customDefinitionNames(r)
		return n, l, nil
	}
	name, err := builtin.DefinitionName(r.GroupVersionKind())
	if err != nil {
		return "", "", err
	}
	list, err := builtin.DefinitionName(r.GroupVersion().WithKind(r.ListKind))
	return name, list, err
}

// operation is one operation of the documents, before it is written as v2 or v3.
type operation struct {
	path, method, action string
	res                  Resource
	kind                 string // the definition of the request and response body
	body                 bool   // the request has a body of kind
	patch                bool
	write                bool // takes dryRun, fieldManager and fieldValidation
	list                 bool // takes the list options
	// scale says the operation is on the scale subresource, whose kind is autoscaling/v1 Scale.
	scale bool
}

// operations are the operations of the resources of a group version, as the installer registers
// them.
func (o *openAPI) operations(gv groupVersion) ([]operation, error) {
	var ops []operation
	names := make([]string, 0, len(o.server.resources[gv]))
	for n := range o.server.resources[gv] {
		names = append(names, n)
	}
	sort.Strings(names)
	base := "/" + gvPath(gv)
	for _, n := range names {
		h := o.server.resources[gv][n]
		r := h.res
		kind, list, err := definitionNames(r)
		if err != nil {
			return nil, err
		}
		collection := base + "/" + r.Resource
		if r.Namespaced {
			ops = append(ops, operation{path: collection, method: "get", action: "list", res: r, kind: list, list: true})
			collection = base + "/namespaces/{namespace}/" + r.Resource
		}
		item := collection + "/{name}"
		ops = append(ops,
			operation{path: collection, method: "get", action: "list", res: r, kind: list, list: true},
			operation{path: collection, method: "post", action: "post", res: r, kind: kind, body: true, write: true},
			operation{path: collection, method: "delete", action: "deletecollection", res: r, kind: "io.k8s.apimachinery.pkg.apis.meta.v1.Status", list: true},
			operation{path: item, method: "get", action: "get", res: r, kind: kind},
			operation{path: item, method: "put", action: "put", res: r, kind: kind, body: true, write: true},
			operation{path: item, method: "patch", action: "patch", res: r, kind: kind, patch: true, write: true},
			operation{path: item, method: "delete", action: "delete", res: r, kind: "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
		)
		if r.StatusSubresource {
			ops = append(ops,
				operation{path: item + "/status", method: "get", action: "get", res: r, kind: kind},
				operation{path: item + "/status", method: "put", action: "put", res: r, kind: kind, body: true, write: true},
				operation{path: item + "/status", method: "patch", action: "patch", res: r, kind: kind, patch: true, write: true},
			)
		}
		if r.Scale != nil {
			const scale = "io.k8s.api.autoscaling.v1.Scale"
			ops = append(ops,
				operation{path: item + "/scale", method: "get", action: "get", res: r, kind: scale, scale: true},
				operation{path: item + "/scale", method: "put", action: "put", res: r, kind: scale, body: true, write: true, scale: true},
				operation{path: item + "/scale", method: "patch", action: "patch", res: r, kind: scale, patch: true, write: true, scale: true},
			)
		}
		if r.isCoreNamespaces() {
			ops = append(ops, operation{path: item + "/finalize", method: "put", action: "put", res: r, kind: kind, body: true, write: true})
		}
	}
	return ops, nil
}

// parameters are an operation's parameters, as the installer declares them.
func (op operation) parameters() [][2]string {
	var out [][2]string // name, in
	if strings.Contains(op.path, "{name}") {
		out = append(out, [2]string{"name", "path"})
	}
	if strings.Contains(op.path, "{namespace}") {
		out = append(out, [2]string{"namespace", "path"})
	}
	out = append(out, [2]string{"pretty", "query"})
	if op.write {
		out = append(out, [2]string{"dryRun", "query"}, [2]string{"fieldManager", "query"}, [2]string{"fieldValidation", "query"})
	}
	if op.patch {
		out = append(out, [2]string{"force", "query"})
	}
	if op.list {
		for _, p := range []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"} {
			out = append(out, [2]string{p, "query"})
		}
	}
	return out
}

func (op operation) consumes(h *resourceHandler) []string {
	switch {
	case op.patch:
		return h.patchTypes()
	case op.body:
		return h.ep.mediaTypes(false)
	}
	return nil
}

func (op operation) gvk() map[string]any {
	if op.scale {
		return map[string]any{"group": scaleGVK.Group, "version": scaleGVK.Version, "kind": scaleGVK.Kind}
	}
	return map[string]any{"group": op.res.Group, "version": op.res.Version, "kind": op.res.Kind}
}

// v3Document is the OpenAPI v3 document of a group version.
func (o *openAPI) v3Document(gv groupVersion) (*spec3.OpenAPI, error) {
	const prefix = "#/components/schemas/"
	defs, err := o.definitions(true, &gv)
	if err != nil {
		return nil, err
	}
	ops, err := o.operations(gv)
	if err != nil {
		return nil, err
	}
	doc := &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.0"}},
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
		Components: &spec3.Components{},
	}
	var roots []string
	for _, op := range ops {
		h := o.server.resources[gv][op.res.Resource]
		p := doc.Paths.Paths[op.path]
		if p == nil {
			p = &spec3.Path{}
			doc.Paths.Paths[op.path] = p
		}
		ref := &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(prefix + op.kind)}}
		roots = append(roots, op.kind)
		operation := &spec3.Operation{OperationProps: spec3.OperationProps{
			OperationId: op.action + op.res.Kind,
			Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
				200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: mediaTypes(h.ep.mediaTypes(false), ref)}},
			}}},
		}}
		operation.AddExtension("x-kubernetes-action", op.action)
		operation.AddExtension("x-kubernetes-group-version-kind", op.gvk())
		for _, param := range op.parameters() {
			operation.Parameters = append(operation.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
				Name: param[0], In: param[1], Required: param[1] == "path",
				Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{paramType(param[0])}}},
			}})
		}
		if types := op.consumes(h); len(types) > 0 {
			body := ref
			if op.patch {
				body = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
			}
			operation.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Required: true, Content: mediaTypes(types, body)}}
		}
		switch op.method {
		case "get":
			p.Get = operation
		case "post":
			p.Post = operation
		case "put":
			p.Put = operation
		case "patch":
			p.Patch = operation
		case "delete":
			p.Delete = operation
		}
	}
	doc.Components.Schemas = reachable(defs, prefix, roots)
	return doc, nil
}

func paramType(name string) string {
	switch name {
	case "limit", "timeoutSeconds":
		return "integer"
	case "allowWatchBookmarks", "force", "sendInitialEvents", "watch":
		return "boolean"
	}
	return "string"
}

func mediaTypes(types []string, schema *spec.Schema) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: schema}}
	}
	return out
}

// v2Document is the Swagger 2.0 document of every served resource.
func (o *openAPI) v2Document() (*spec.Swagger, error) {
	const prefix = "#/definitions/"
	defs, err := o.definitions(false, nil)
	if err != nil {
		return nil, err
	}
	doc := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.0"}},
		Paths:   &spec.Paths{Paths: map[string]spec.PathItem{}},
	}}
	var roots []string
	gvs := make([]groupVersion, 0, len(o.server.resources))
	for gv := range o.server.resources {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvPath(gvs[i]) < gvPath(gvs[j]) })
	for _, gv := range gvs {
		ops, err := o.operations(gv)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			h := o.server.resources[gv][op.res.Resource]
			item := doc.Paths.Paths[op.path]
			roots = append(roots, op.kind)
			ref := spec.MustCreateRef(prefix + op.kind)
			operation := &spec.Operation{OperationProps: spec.OperationProps{
				ID:       op.action + op.res.Kind,
				Consumes: op.consumes(h),
				Produces: h.ep.mediaTypes(false),
				Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
					200: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref}}}},
				}}},
			}}
			operation.AddExtension("x-kubernetes-action", op.action)
			operation.AddExtension("x-kubernetes-group-version-kind", op.gvk())
			for _, param := range op.parameters() {
				operation.Parameters = append(operation.Parameters, spec.Parameter{
					ParamProps:   spec.ParamProps{Name: param[0], In: param[1], Required: param[1] == "path"},
					SimpleSchema: spec.SimpleSchema{Type: paramType(param[0])},
				})
			}
			if op.body || op.patch {
				schema := &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref}}
				if op.patch {
					schema = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
				}
				operation.Parameters = append(operation.Parameters, spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: true, Schema: schema}})
			}
			switch op.method {
			case "get":
				item.Get = operation
			case "post":
				item.Post = operation
			case "put":
				item.Put = operation
			case "patch":
				item.Patch = operation
			case "delete":
				item.Delete = operation
			}
			doc.Paths.Paths[op.path] = item
		}
	}
	kept := reachable(defs, prefix, roots)
	doc.Definitions = make(spec.Definitions, len(kept))
	for k, v := range kept {
		doc.Definitions[k] = *v
	}
	return doc, nil
}
