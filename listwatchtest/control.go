package listwatchtest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// registryPrefix is where the etcd3 storage keeps every resource, etcd3.Config.Prefix's default,
// as kube-apiserver's --etcd-prefix.
const registryPrefix = "/registry"

// cacheRestartDelay is how long a watch cache waits before it relists after its watch failed
// (cache.Cacher's restart period, upstream's one second in cacher.go NewCacherFromConfig).
const cacheRestartDelay = time.Second

// resource returns the served resource named as its GroupResource prints.
func (e *Env) resource(name string) (httpwatch.Resource, error) {
	if e.chain == nil {
		return httpwatch.Resource{}, ErrNoKubernetesAPI
	}
	for _, r := range e.opts.resources {
		if r.GroupResource().String() == name {
			return r, nil
		}
	}
	return httpwatch.Resource{}, fmt.Errorf("%w: %q", ErrUnknownResource, name)
}

// Key returns the etcd key at which the Kubernetes API keeps an object of a served resource, named
// as its GroupResource prints ("configmaps", "widgets.example.com"): /registry/<prefix>/<namespace>/<name>,
// without the namespace for a cluster-scoped resource.
func (e *Env) Key(resource, namespace, name string) (string, error) {
	r, err := e.resource(resource)
	if err != nil {
		return "", err
	}
	if r.Namespaced != (namespace != "") {
		return "", fmt.Errorf("listwatchtest: %s is namespaced: %v, but namespace %q was given", resource, r.Namespaced, namespace)
	}
	if name == "" {
		return "", errors.New("listwatchtest: an object name is required")
	}
	return path.Join(registryPrefix, r.ResourcePrefix(), namespace, name), nil
}

// Raw reads a key straight from the store, as etcd holds it (the value the storage encoded, its
// revisions and lease); nil if the key does not exist.
func (e *Env) Raw(key string) (*store.KeyValue, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	resp, err := e.store.Range(&store.RangeRequest{Key: []byte(key)})
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return &resp.Kvs[0], nil
}

// RawList reads every key under prefix straight from the store, in key order.
func (e *Env) RawList(prefix string) ([]store.KeyValue, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	if prefix == "" {
		return nil, errors.New("listwatchtest: an empty prefix")
	}
	resp, err := e.store.Range(&store.RangeRequest{Key: []byte(prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(prefix))})
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// Compact compacts the store at its current revision, as the apiserver's compactor does every five
// minutes, and returns that revision. etcd watches and reads from before it then fail as etcd's do
// (ErrCompacted, and 410 Expired from the Kubernetes API's uncached reads). A watch cache keeps its
// own history: Relist empties it. Compacting again with nothing written since fails with the
// store's ErrCompacted, as etcd answers "required revision has been compacted".
func (e *Env) Compact() (int64, error) {
	if e.isClosed() {
		return 0, ErrClosed
	}
	rev := e.store.Rev()
	if _, err := e.store.Compact(rev); err != nil {
		return 0, fmt.Errorf("listwatchtest: compacting at revision %d: %w", rev, err)
	}
	return rev, nil
}

// expired is the 410 a watch cache sends a watch whose resourceVersion it no longer holds.
func expired() *metav1.Status {
	status := apierrors.NewResourceExpired("too old resource version: expired by listwatchtest.InjectExpired").ErrStatus
	return &status
}

// InjectExpired ends every open watch of a resource served by the Kubernetes API with an ERROR
// event, 410 Expired, as a watch whose resourceVersion the server no longer holds; a client then
// lists again. It returns how many watches it ended; watches opened later are not affected.
func (e *Env) InjectExpired(resource string) (int, error) {
	if _, err := e.resource(resource); err != nil {
		return 0, err
	}
	return e.served[resource].end(expired()), nil
}

// DropWatches closes every open watch of a resource served by the Kubernetes API without an event,
// as the watch cache drops a watcher too slow to keep up; a client watches again from the last
// resourceVersion it saw. It returns how many watches it closed.
func (e *Env) DropWatches(resource string) (int, error) {
	if _, err := e.resource(resource); err != nil {
		return 0, err
	}
	return e.served[resource].end(nil), nil
}

// Relist makes the watch cache of a resource relist, as it does when its own watch of etcd fails
// (a compaction, a 410): its watch is ended with a 410, every watch it serves is closed without an
// event, its history is emptied, and it lists the store again. Relist returns once the cache
// serves again from the new list. It moves the Clock forward by the cache's one-second restart
// delay rather than wait for it. A watch from a resourceVersion before the relist then gets 410
// Expired.
func (e *Env) Relist(ctx context.Context, resource string) error {
	if _, err := e.resource(resource); err != nil {
		return err
	}
	cacher := e.chain.Cacher(resource)
	if cacher == nil {
		return fmt.Errorf("%w: %q", ErrNoWatchCache, resource)
	}
	set := e.reflector[resource]
	// The cache may be between two watches (it re-watches after a clean close): end the one
	// there is, once there is one. Its next watch follows the relist's list.
	ended := 0
	err := testutil.Poller{}.Poll("the watch cache of "+resource+" to watch", func() bool {
		if ctx.Err() != nil || e.isClosed() || set.end(expired()) == 0 {
			return ctx.Err() != nil || e.isClosed()
		}
		ended = set.count()
		return true
	})
	if err := firstErr(ctx, e, err); err != nil {
		return err
	}
	stepped := false
	err = testutil.Poller{}.Poll("the watch cache of "+resource+" to relist", func() bool {
		if ctx.Err() != nil || e.isClosed() {
			return true
		}
		if !stepped && !cacher.Ready() {
			// The cache waits for its restart delay once it has become pending.
			stepped = true
			_ = e.clock.Step(cacheRestartDelay) // a step forward cannot fail
		}
		return set.count() > ended && cacher.Ready()
	})
	return firstErr(ctx, e, err)
}

// firstErr is the reason a wait ended early (the context, a closed environment) or its timeout.
func firstErr(ctx context.Context, e *Env, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if e.isClosed() {
		return ErrClosed
	}
	if err != nil {
		return fmt.Errorf("listwatchtest: %w", err)
	}
	return nil
}

// dynamicClient is a dynamic client of the Kubernetes API, made at the first call.
func (e *Env) dynamicClient() (*dynamic.DynamicClient, error) {
	if e.chain == nil {
		return nil, ErrNoKubernetesAPI
	}
	e.dynOnce.Do(func() { e.dyn, e.dynErr = dynamic.NewForConfig(e.Config()) })
	return e.dyn, e.dynErr
}

// Seed creates objects through the Kubernetes API, in order, as a client would: typed objects
// (their kind from their apiVersion and kind, else from the WithScheme scheme) or
// *unstructured.Unstructured. Each object given is updated with what the server stored (its
// resourceVersion, uid, creationTimestamp). It stops at the first failure, which names the object.
func (e *Env) Seed(ctx context.Context, objs ...runtime.Object) error {
	if e.isClosed() {
		return ErrClosed
	}
	dyn, err := e.dynamicClient()
	if err != nil {
		return err
	}
	for i, obj := range objs {
		if err := e.seed(ctx, dyn, obj); err != nil {
			return fmt.Errorf("listwatchtest: seeding object %d: %w", i, err)
		}
	}
	return nil
}

func (e *Env) seed(ctx context.Context, dyn *dynamic.DynamicClient, obj runtime.Object) error {
	if obj == nil {
		return errors.New("a nil object")
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		kinds, _, err := e.opts.scheme.ObjectKinds(obj)
		if err != nil {
			return fmt.Errorf("%T has no apiVersion and kind, and the scheme does not know it: %w", obj, err)
		}
		gvk = kinds[0]
	}
	var content map[string]any
	if u, ok := obj.(runtime.Unstructured); ok {
		content = runtime.DeepCopyJSON(u.UnstructuredContent())
	} else {
		var err error
		if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return fmt.Errorf("%T: %w", obj, err)
		}
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	var res *httpwatch.Resource
	for i, r := range e.opts.resources {
		if r.GroupVersionKind() == gvk {
			res = &e.opts.resources[i]
			break
		}
	}
	if res == nil {
		return fmt.Errorf("%w: no served resource has kind %s", ErrUnknownResource, gvk)
	}
	gvr := res.GroupVersion().WithResource(res.Resource)
	var client dynamic.ResourceInterface = dyn.Resource(gvr)
	if res.Namespaced {
		if u.GetNamespace() == "" {
			return fmt.Errorf("%s %q: %s is namespaced and metadata.namespace is empty", gvk.Kind, u.GetName(), res.GroupResource())
		}
		client = dyn.Resource(gvr).Namespace(u.GetNamespace())
	}
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	if out, ok := obj.(runtime.Unstructured); ok {
		out.SetUnstructuredContent(created.Object)
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, obj)
}
