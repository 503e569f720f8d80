package storagetest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// step is one write of a transition scenario and the event it must (or must not) cause.
type step struct {
	obj  *unstructured.Unstructured // the object to put; nil deletes del
	del  string                     // "ns/name" to delete when obj is nil
	want apiwatch.EventType         // "" means no event
}

func put(obj *unstructured.Unstructured, want apiwatch.EventType) step {
	return step{obj: obj, want: want}
}

func del(ns, name string, want apiwatch.EventType) step {
	return step{del: ns + "/" + name, want: want}
}

// transitionCase builds the common shape of the watch tests of watcher_tests.go: list to get a start
// revision, watch from it, apply steps, read the events they cause, then sync and stop (nothing else may
// arrive). before are writes (not watched) made after the watch opened; scope is the request's
// namespace and name the watch is made with, as upstream's cases put them on the context with
// request.WithNamespace and WithRequestInfo. Want is derived from the steps
// by a model that knows nothing of the implementation: every write is one revision, ADDED and MODIFIED
// carry the written object, DELETED the previous one at the new revision.
func transitionCase(name, upstream, listKey, watchKey string, scope storage.RequestScope, opts storage.ListOptions, before []*unstructured.Unstructured, steps []step) Case {
	want := []string{"l list rv=+0 items=[]"}
	rel := 0
	for _, b := range before {
		rel++
		want = append(want, "put "+At(b, rel))
	}
	stored := map[string]*unstructured.Unstructured{}
	for _, s := range steps {
		rel++
		var line, ev string
		if s.obj != nil {
			k := s.obj.GetNamespace() + "/" + s.obj.GetName()
			prev := stored[k]
			stored[k] = s.obj
			line = "put " + At(s.obj, rel)
			switch s.want {
			case apiwatch.Added, apiwatch.Modified:
				ev = fmt.Sprintf("w %s %s", s.want, At(s.obj, rel))
			case apiwatch.Deleted:
				ev = "w DELETED " + At(prev, rel)
			}
		} else {
			prev := stored[s.del]
			delete(stored, s.del)
			line = "delete " + At(prev, rel)
			if s.want != "" {
				ev = "w DELETED " + At(prev, rel)
			}
		}
		want = append(want, line)
		if ev != "" {
			want = append(want, ev)
		}
	}
	want = append(want, fmt.Sprintf("sync +%d", rel+1), "w closed")
	return Case{
		Name:     name,
		Upstream: upstream,
		Run: func(h *H) {
			lo := opts
			lo.ResourceVersion = ""
			lo.Recursive = true
			if listKey == watchKey {
				lo.Recursive = opts.Recursive
			}
			l := h.List("l", listKey, lo)
			if l == nil {
				h.Fail("list failed")
			}
			wo := opts
			wo.ResourceVersion = l.GetResourceVersion()
			w := h.watchCtx(storage.WithRequestScope(h.Ctx(), scope), h.storage, "w", watchKey, wo)
			if w == nil {
				h.Fail("watch failed")
			}
			for _, b := range before {
				h.Put(b)
			}
			for _, s := range steps {
				if s.obj != nil {
					h.Put(s.obj)
				} else {
					ns, n := splitName(s.del)
					h.Delete(Key(ns, n))
				}
				if s.want != "" {
					w.Next(1)
				}
			}
			w.Sync()
			w.Stop()
		},
		Want: want,
	}
}

func splitName(nsName string) (string, string) {
	for i := 0; i < len(nsName); i++ {
		if nsName[i] == '/' {
			return nsName[:i], nsName[i+1:]
		}
	}
	return "", nsName
}

// watchCases ports RunTestWatch: predicate transitions on a single key, recursive or not,
// with a write in another namespace that must not be seen.
func watchCases() []Case {
	base := Pod("ns", "foo")
	assigned := Pod("ns", "foo", Node("bar"))
	selected := Pod("ns", "foo", Labels("select=true"))
	selectedAssigned := Pod("ns", "foo", Node("bar"), Labels("select=true"))
	subs := []struct {
		name  string
		pred  storage.Predicate
		steps []step
	}{
		{"create a key", storage.Everything, []step{put(base, apiwatch.Added)}},
		{"key updated to match predicate", PodPredicate("", "spec.nodeName=bar"), []step{put(base, ""), put(assigned, apiwatch.Added)}},
		{"update", storage.Everything, []step{put(base, apiwatch.Added), put(assigned, apiwatch.Modified)}},
		{"delete because of being filtered", PodPredicate("", "spec.nodeName!=bar"), []step{put(base, apiwatch.Added), put(assigned, apiwatch.Deleted)}},
		{"filtering", PodPredicate("select=true", ""), []step{
			put(selected, apiwatch.Added),
			put(base, apiwatch.Deleted),
			put(selected, apiwatch.Added),
			put(selectedAssigned, apiwatch.Modified),
			del("ns", "foo", apiwatch.Deleted),
		}},
	}
	var cases []Case
	for _, recursive := range []bool{false, true} {
		for _, sub := range subs {
			key := "/pods/ns/foo"
			if recursive {
				key = "/pods/ns"
			}
			cases = append(cases, transitionCase(
				fmt.Sprintf("Watch/%s/recursive=%t", sub.name, recursive), "RunTestWatch", key, key, storage.RequestScope{},
				storage.ListOptions{Predicate: sub.pred, Recursive: recursive},
				[]*unstructured.Unstructured{Pod("ns-bad", "foo")}, sub.steps))
		}
	}
	return cases
}

func clusterPod(name string, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	return Pod("", name, mods...)
}

// indexedPodPredicate is PodPredicate("", field) with the IndexFields upstream's cases give a
// selector on spec.nodeName (CreatePodPredicate's indexField), which lets a watch cache with the
// spec.nodeName trigger index the watcher by its value.
func indexedPodPredicate(field string) storage.Predicate {
	p := PodPredicate("", field)
	if strings.Contains(field, "spec.nodeName") {
		p.IndexFields = []string{"spec.nodeName"}
	}
	return p
}

// clusterScopedCases ports RunTestClusterScopedWatch.
func clusterScopedCases() []Case {
	type tc struct {
		name, requestedName string
		recursive           bool
		field               string
		steps               []step
	}
	updated := func(n string) *unstructured.Unstructured { return clusterPod(n, Phase("Running")) }
	assigned := func(n, node string) *unstructured.Unstructured { return clusterPod(n, Node(node)) }
	tcs := []tc{
		{"cluster-wide watch, request without name, without field selector", "", true, "", []step{
			put(clusterPod("t1-foo1"), apiwatch.Added),
			put(updated("t1-foo1"), apiwatch.Modified),
			put(assigned("t1-foo2", "t1-bar1"), apiwatch.Added),
		}},
		{"cluster-wide watch, request without name, field selector with spec.nodeName", "", true, "spec.nodeName=t2-bar1", []step{
			put(clusterPod("t2-foo1"), ""),
			put(assigned("t2-foo1", "t2-bar1"), apiwatch.Added),
		}},
		{"cluster-wide watch, request without name, field selector with spec.nodeName to filter out watch", "", true, "spec.nodeName!=t3-bar1", []step{
			put(clusterPod("t3-foo1"), apiwatch.Added),
			put(clusterPod("t3-foo2"), apiwatch.Added),
			put(updated("t3-foo1"), apiwatch.Modified),
			put(assigned("t3-foo1", "t3-bar1"), apiwatch.Deleted),
		}},
		{"cluster-wide watch, request with name, field selector with metadata.name", "t4-foo1", false, "metadata.name=t4-foo1", []step{
			put(clusterPod("t4-foo1"), apiwatch.Added),
			put(clusterPod("t4-foo2"), ""),
			put(updated("t4-foo1"), apiwatch.Modified),
			put(updated("t4-foo2"), ""),
		}},
		{"cluster-wide watch, request with name, field selector with metadata.name and spec.nodeName", "t5-foo1", false, "metadata.name=t5-foo1,spec.nodeName=t5-bar1", []step{
			put(clusterPod("t5-foo1"), ""),
			put(clusterPod("t5-foo2"), ""),
			put(updated("t5-foo1"), ""),
			put(updated("t5-foo2"), ""),
			put(assigned("t5-foo1", "t5-bar1"), apiwatch.Added),
		}},
		{"cluster-wide watch, request with name, field selector with metadata.name, and with spec.nodeName to filter out watch", "t6-foo1", false, "spec.nodeName!=t6-bar1,metadata.name=t6-foo1", []step{
			put(clusterPod("t6-foo1"), apiwatch.Added),
			put(clusterPod("t6-foo2"), ""),
			put(updated("t6-foo1"), apiwatch.Modified),
			put(assigned("t6-foo1", "t6-bar1"), apiwatch.Deleted),
			put(assigned("t6-foo2", "t6-bar1"), ""),
		}},
	}
	var cases []Case
	for _, t := range tcs {
		key := "/pods/" + t.requestedName
		cases = append(cases, transitionCase("ClusterScopedWatch/"+t.name, "RunTestClusterScopedWatch", "/pods/", key,
			storage.RequestScope{Name: t.requestedName},
			storage.ListOptions{Predicate: indexedPodPredicate(t.field), Recursive: t.recursive}, nil, t.steps))
	}
	return cases
}

// namespaceScopedTC is one test case of RunTestNamespaceScopedWatch: the request's name and
// namespace, whether it is recursive, its field selector and the writes with the events they cause.
type namespaceScopedTC struct {
	name, requestedName, requestedNamespace string
	recursive                               bool
	field                                   string
	steps                                   []step
}

// nsPod, nsRunning and nsAssigned are the pods of RunTestNamespaceScopedWatch: created, running, and
// assigned to a node.
func nsPod(n, ns string) *unstructured.Unstructured            { return Pod(ns, n) }
func nsRunning(n, ns string) *unstructured.Unstructured        { return Pod(ns, n, Phase("Running")) }
func nsAssigned(n, ns, node string) *unstructured.Unstructured { return Pod(ns, n, Node(node)) }

// namespaceScopedCases ports RunTestNamespaceScopedWatch.
func namespaceScopedCases() []Case {
	var cases []Case
	for _, t := range append(namespaceScopedWithoutName(), namespaceScopedWithName()...) {
		key := "/pods/"
		if t.requestedNamespace != "" {
			key += t.requestedNamespace + "/"
			if t.requestedName != "" {
				key += t.requestedName
			}
		}
		cases = append(cases, transitionCase("NamespaceScopedWatch/"+t.name, "RunTestNamespaceScopedWatch", "/pods/", key,
			storage.RequestScope{Namespace: t.requestedNamespace, Name: t.requestedName},
			storage.ListOptions{Predicate: indexedPodPredicate(t.field), Recursive: t.recursive}, nil, t.steps))
	}
	return cases
}

// namespaceScopedWithoutName are RunTestNamespaceScopedWatch's requests without a name.
func namespaceScopedWithoutName() []namespaceScopedTC {
	return []namespaceScopedTC{
		{"namespaced watch, request without name, request without namespace, without field selector", "", "", true, "", []step{
			put(nsPod("t1-foo1", "t1-ns1"), apiwatch.Added),
			put(nsPod("t1-foo2", "t1-ns2"), apiwatch.Added),
			put(nsRunning("t1-foo1", "t1-ns1"), apiwatch.Modified),
			put(nsRunning("t1-foo2", "t1-ns2"), apiwatch.Modified),
		}},
		{"namespaced watch, request without name, request without namespace, field selector with metadata.namespace", "", "", true, "metadata.namespace=t2-ns1", []step{
			put(nsPod("t2-foo1", "t2-ns1"), apiwatch.Added),
			put(nsPod("t2-foo1", "t2-ns2"), ""),
			put(nsRunning("t2-foo1", "t2-ns1"), apiwatch.Modified),
			put(nsRunning("t2-foo1", "t2-ns2"), ""),
		}},
		{"namespaced watch, request without name, request without namespace, field selector with spec.nodename", "", "", true, "spec.nodeName=t3-bar1", []step{
			put(nsPod("t3-foo1", "t3-ns1"), ""),
			put(nsPod("t3-foo2", "t3-ns2"), ""),
			put(nsAssigned("t3-foo1", "t3-ns1", "t3-bar1"), apiwatch.Added),
			put(nsAssigned("t3-foo2", "t3-ns2", "t3-bar1"), apiwatch.Added),
		}},
		{"namespaced watch, request without name, request without namespace, field selector with spec.nodename to filter out watch", "", "", true, "spec.nodeName!=t4-bar1", []step{
			put(nsPod("t4-foo1", "t4-ns1"), apiwatch.Added),
			put(nsPod("t4-foo2", "t4-ns1"), apiwatch.Added),
			put(nsRunning("t4-foo1", "t4-ns1"), apiwatch.Modified),
			put(nsAssigned("t4-foo1", "t4-ns1", "t4-bar1"), apiwatch.Deleted),
		}},
		{"namespaced watch, request without name, request with namespace, without field selector", "", "t5-ns1", true, "", []step{
			put(nsPod("t5-foo1", "t5-ns1"), apiwatch.Added),
			put(nsPod("t5-foo1", "t5-ns2"), ""),
			put(nsPod("t5-foo2", "t5-ns1"), apiwatch.Added),
			put(nsRunning("t5-foo1", "t5-ns1"), apiwatch.Modified),
			put(nsRunning("t5-foo1", "t5-ns2"), ""),
		}},
		{"namespaced watch, request without name, request with namespace, field selector with matched metadata.namespace", "", "t6-ns1", true, "metadata.namespace=t6-ns1", []step{
			put(nsPod("t6-foo1", "t6-ns1"), apiwatch.Added),
			put(nsPod("t6-foo1", "t6-ns2"), ""),
			put(nsRunning("t6-foo1", "t6-ns1"), apiwatch.Modified),
		}},
		{"namespaced watch, request without name, request with namespace, field selector with non-matched metadata.namespace", "", "t7-ns1", true, "metadata.namespace=t7-ns2", []step{
			put(nsPod("t7-foo1", "t7-ns1"), ""),
			put(nsPod("t7-foo1", "t7-ns2"), ""),
			put(nsRunning("t7-foo1", "t7-ns1"), ""),
			put(nsRunning("t7-foo1", "t7-ns2"), ""),
		}},
		{"namespaced watch, request without name, request with namespace, field selector with spec.nodename", "", "t8-ns1", true, "spec.nodeName=t8-bar2", []step{
			put(nsPod("t8-foo1", "t8-ns1"), ""),
			put(nsAssigned("t8-foo1", "t8-ns1", "t8-bar1"), ""),
			put(nsAssigned("t8-foo1", "t8-ns2", "t8-bar2"), ""),
			put(nsAssigned("t8-foo1", "t8-ns1", "t8-bar2"), apiwatch.Added),
		}},
		{"namespaced watch, request without name, request with namespace, field selector with spec.nodename to filter out watch", "", "t9-ns2", true, "spec.nodeName!=t9-bar1", []step{
			put(nsPod("t9-foo1", "t9-ns1"), ""),
			put(nsPod("t9-foo1", "t9-ns2"), apiwatch.Added),
			put(nsAssigned("t9-foo1", "t9-ns2", "t9-bar1"), apiwatch.Deleted),
			put(nsAssigned("t9-foo1", "t9-ns2", "t9-bar2"), apiwatch.Added),
		}},
	}
}

// namespaceScopedWithName are RunTestNamespaceScopedWatch's requests with a name.
func namespaceScopedWithName() []namespaceScopedTC {
	return []namespaceScopedTC{
		{"namespaced watch, request with name, request without namespace, field selector with metadata.name", "t10-foo1", "", true, "metadata.name=t10-foo1", []step{
			put(nsPod("t10-foo1", "t10-ns1"), apiwatch.Added),
			put(nsPod("t10-foo1", "t10-ns2"), apiwatch.Added),
			put(nsPod("t10-foo2", "t10-ns1"), ""),
			put(nsRunning("t10-foo1", "t10-ns1"), apiwatch.Modified),
			put(nsAssigned("t10-foo1", "t10-ns1", "t10-bar1"), apiwatch.Modified),
		}},
		{"namespaced watch, request with name, request without namespace, field selector with metadata.name and metadata.namespace", "t11-foo1", "", true, "metadata.name=t11-foo1,metadata.namespace=t11-ns1", []step{
			put(nsPod("t11-foo1", "t11-ns1"), apiwatch.Added),
			put(nsPod("t11-foo2", "t11-ns1"), ""),
			put(nsPod("t11-foo1", "t11-ns2"), ""),
			put(nsRunning("t11-foo1", "t11-ns1"), apiwatch.Modified),
			put(nsAssigned("t11-foo1", "t11-ns1", "t11-bar1"), apiwatch.Modified),
		}},
		{"namespaced watch, request with name, request without namespace, field selector with metadata.name and spec.nodeName", "t12-foo1", "", true, "metadata.name=t12-foo1,spec.nodeName=t12-bar1", []step{
			put(nsPod("t12-foo1", "t12-ns1"), ""),
			put(nsRunning("t12-foo1", "t12-ns1"), ""),
			put(nsAssigned("t12-foo1", "t12-ns1", "t12-bar1"), apiwatch.Added),
		}},
		{"namespaced watch, request with name, request without namespace, field selector with metadata.name, and with spec.nodeName to filter out watch", "t15-foo1", "", true, "spec.nodeName!=t15-bar1,metadata.name=t15-foo1", []step{
			put(nsPod("t15-foo1", "t15-ns1"), apiwatch.Added),
			put(nsPod("t15-foo2", "t15-ns1"), ""),
			put(nsRunning("t15-foo1", "t15-ns1"), apiwatch.Modified),
			put(nsAssigned("t15-foo1", "t15-ns1", "t15-bar1"), apiwatch.Deleted),
			put(nsAssigned("t15-foo1", "t15-ns1", "t15-bar2"), apiwatch.Added),
		}},
		{"namespaced watch, request with name, request with namespace, with field selector metadata.name", "t16-foo1", "t16-ns1", false, "metadata.name=t16-foo1", []step{
			put(nsPod("t16-foo1", "t16-ns1"), apiwatch.Added),
			put(nsPod("t16-foo2", "t16-ns1"), ""),
			put(nsRunning("t16-foo1", "t16-ns1"), apiwatch.Modified),
			put(nsAssigned("t16-foo1", "t16-ns1", "t16-bar1"), apiwatch.Modified),
		}},
		{"namespaced watch, request with name, request with namespace, with field selector metadata.name and metadata.namespace", "t17-foo2", "t17-ns1", false, "metadata.name=t17-foo2,metadata.namespace=t17-ns1", []step{
			put(nsPod("t17-foo1", "t17-ns1"), ""),
			put(nsPod("t17-foo2", "t17-ns1"), apiwatch.Added),
			put(nsRunning("t17-foo1", "t17-ns1"), ""),
			put(nsAssigned("t17-foo2", "t17-ns1", "t17-bar1"), apiwatch.Modified),
		}},
		{"namespaced watch, request with name, request with namespace, with field selector metadata.name, metadata.namespace and spec.nodename", "t18-foo1", "t18-ns1", false, "metadata.name=t18-foo1,metadata.namespace=t18-ns1,spec.nodeName=t18-bar1", []step{
			put(nsPod("t18-foo1", "t18-ns1"), ""),
			put(nsPod("t18-foo2", "t18-ns1"), ""),
			put(nsPod("t18-foo1", "t18-ns2"), ""),
			put(nsRunning("t18-foo1", "t18-ns1"), ""),
			put(nsAssigned("t18-foo1", "t18-ns1", "t18-bar1"), apiwatch.Added),
		}},
		{"namespaced watch, request with name, request with namespace, with field selector metadata.name, metadata.namespace, and with spec.nodename to filter out watch", "t19-foo2", "t19-ns1", false, "spec.nodeName!=t19-bar1,metadata.name=t19-foo2,metadata.namespace=t19-ns1", []step{
			put(nsPod("t19-foo1", "t19-ns1"), ""),
			put(nsPod("t19-foo2", "t19-ns2"), ""),
			put(nsPod("t19-foo2", "t19-ns1"), apiwatch.Added),
			put(nsRunning("t19-foo2", "t19-ns1"), apiwatch.Modified),
			put(nsAssigned("t19-foo2", "t19-ns1", "t19-bar1"), apiwatch.Deleted),
		}},
	}
}
