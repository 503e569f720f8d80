package httpwatch

import (
	"bytes"
	"encoding/json"
	"net/http"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Aggregated discovery (apidiscovery.k8s.io/v2), which client-go v0.37's discovery client asks
// for first: /api and /apis answer with every group version and its resources in one document
// when the Accept header asks for an APIGroupDiscoveryList.
//
// Mirrors k8s.io/apiserver pkg/endpoints/discovery/aggregated (handler.go, the resource manager's
// document).

// serveRootDiscovery answers /api (core) or /apis: the aggregated document when asked for,
// else the legacy one.
func (s *Server) serveRootDiscovery(w http.ResponseWriter, req *http.Request, legacy runtime.Object, core bool) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, req, methodNotAllowed())
		return
	}
	n, err := rootDiscoveryEndpoint.negotiateOutput(req, false)
	if err != nil || n.convert == nil {
		s.writeObject(w, req, http.StatusOK, legacy)
		return
	}
	doc := s.aggregatedDiscovery(core)
	doc.APIVersion = discoveryGroup + "/" + n.convert.Version
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if n.pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(doc); err != nil {
		s.writeError(w, req, err)
		return
	}
	// client-go recognises the aggregated document by these parameters of its Content-Type.
	w.Header().Set("Content-Type", contentTypeJSON+";g="+discoveryGroup+";v="+n.convert.Version+";as="+asAPIGroupDiscoveryList)
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// aggregatedDiscovery is the document of the core group (core) or of every other group.
func (s *Server) aggregatedDiscovery(core bool) *apidiscoveryv2.APIGroupDiscoveryList {
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: asAPIGroupDiscoveryList},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	groups := s.groups
	if core {
		groups = []string{""}
	}
	for _, g := range groups {
		var versions []apidiscoveryv2.APIVersionDiscovery
		for _, gvd := range s.groupVersionsOf(g) {
			gv := groupVersion{g, gvd.Version}
			handlers := s.resources[gv]
			v := apidiscoveryv2.APIVersionDiscovery{Version: gv.version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{}}
			for _, ar := range s.apiResourceList(gv).APIResources {
				if isSubresourceName(ar.Name) {
					continue
				}
				h := handlers[ar.Name]
				scope := apidiscoveryv2.ScopeCluster
				if h.res.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource:         ar.Name,
					ResponseKind:     &metav1.GroupVersionKind{Group: h.res.Group, Version: h.res.Version, Kind: h.res.Kind},
					Scope:            scope,
					SingularResource: h.res.SingularName,
					Verbs:            ar.Verbs,
					ShortNames:       ar.ShortNames,
					Categories:       ar.Categories,
				}
				for _, sub := range h.res.apiResources()[1:] {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource:  sub.Name[len(ar.Name)+1:],
						ResponseKind: subresourceKind(h.res, sub),
						Verbs:        sub.Verbs,
					})
				}
				v.Resources = append(v.Resources, rd)
			}
			versions = append(versions, v)
		}
		if len(versions) == 0 {
			continue
		}
		item := apidiscoveryv2.APIGroupDiscovery{Versions: versions}
		item.Name = g
		list.Items = append(list.Items, item)
	}
	return list
}

func isSubresourceName(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return true
		}
	}
	return false
}

// subresourceKind is the kind a subresource answers in: its own (a Scale's) or the resource's.
func subresourceKind(r Resource, sub metav1.APIResource) *metav1.GroupVersionKind {
	if sub.Kind == scaleGVK.Kind && sub.Version != "" {
		return &metav1.GroupVersionKind{Group: sub.Group, Version: sub.Version, Kind: sub.Kind}
	}
	return &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}
