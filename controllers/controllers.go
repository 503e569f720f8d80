package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// The controllers Start runs, by name.
const (
	// Namespace is the namespace controller: it empties a namespace being deleted and finalizes it.
	Namespace = "namespace"
	// GarbageCollector deletes and orphans dependents by their ownerReferences.
	GarbageCollector = "garbagecollector"
	// Kubelet confirms the graceful deletion of a pod bound to a node, as its node's kubelet would.
	Kubelet = "kubelet"
)

// All are the names of every controller, in the order Start starts them.
var All = []string{Namespace, GarbageCollector, Kubelet}

// ErrInvalidConfig is wrapped by the errors Start returns for a bad Config.
var ErrInvalidConfig = errors.New("controllers: invalid config")

// Config configures Start.
type Config struct {
	// REST is the configuration of the clients the controllers use: they talk to the API as any
	// client does.
	REST *rest.Config
	// Names are the controllers to run, from All; nil runs All.
	Names []string
	// Clock times the requeue of a namespace whose content is not gone yet. Default the real clock.
	Clock clock.WithTicker
	// Logger logs what the controllers do at debug level and their failures at warn level.
	// Default slog.Default().
	Logger *slog.Logger
}

// Controllers are running controllers. Stop stops them.
type Controllers struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	factory metadatainformer.SharedInformerFactory
	queues  []interface{ ShutDown() }
}

// clients are what every controller shares: the clients, the REST mapping of the served kinds,
// the metadata informers of the resources the controllers watch.
type clients struct {
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	mapper    meta.RESTMapper
	resources []servedResource
	factory   metadatainformer.SharedInformerFactory
	clock     clock.WithTicker
	logger    *slog.Logger
}

// servedResource is a resource discovery lists with the verbs the controllers need.
type servedResource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	verbs      []string
}

func (r servedResource) can(verb string) bool { return slices.Contains(r.verbs, verb) }

// Start discovers the served resources, starts the named controllers and returns once their
// informers have synced. Stop stops them; ctx only bounds the start.
func Start(ctx context.Context, cfg Config) (*Controllers, error) {
	if cfg.REST == nil {
		return nil, fmt.Errorf("%w: no REST config", ErrInvalidConfig)
	}
	names := cfg.Names
	if names == nil {
		names = All
	}
	for _, n := range names {
		if !slices.Contains(All, n) {
			return nil, fmt.Errorf("%w: unknown controller %q (known: %v)", ErrInvalidConfig, n, All)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	cs := &Controllers{cancel: cancel, factory: c.factory}
	var runs []func(context.Context)
	for _, n := range names {
		var q interface{ ShutDown() }
		var run func(context.Context)
		switch n {
		case Namespace:
			q, run, err = newNamespaceController(c)
		case GarbageCollector:
			q, run, err = newGarbageCollector(c)
		case Kubelet:
			q, run, err = newKubelet(c)
		}
		if err != nil {
			cancel()
			c.factory.Shutdown()
			return nil, err
		}
		cs.queues = append(cs.queues, q)
		runs = append(runs, run)
	}
	c.factory.Start(runCtx.Done())
	for gvr, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cs.Stop()
			return nil, fmt.Errorf("controllers: the informer of %v did not sync: %w", gvr, ctx.Err())
		}
	}
	for _, run := range runs {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			run(runCtx)
		}()
	}
	return cs, nil
}

// Stop stops the controllers and waits for their goroutines. It is idempotent.
func (cs *Controllers) Stop() {
	cs.cancel()
	for _, q := range cs.queues {
		q.ShutDown()
	}
	cs.wg.Wait()
	cs.factory.Shutdown()
}

func newClients(cfg Config) (*clients, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("controllers: discovery: %w", err)
	}
	c := &clients{mapper: restmapper.NewDiscoveryRESTMapper(groups), clock: cfg.Clock, logger: cfg.Logger}
	// Each resource at its group's most preferred version that has it, as discovery's
	// ServerPreferredResources gives them to the namespace controller and the garbage collector.
	for _, g := range groups {
		seen := map[string]bool{}
		for _, v := range g.Group.Versions {
			for _, r := range g.VersionedResources[v.Version] {
				if r.Kind == "" || containsSlash(r.Name) || seen[r.Name] {
					continue
				}
				seen[r.Name] = true
				gvr := schema.GroupVersionResource{Group: g.Group.Name, Version: v.Version, Resource: r.Name}
				c.resources = append(c.resources, servedResource{gvr: gvr, kind: r.Kind, namespaced: r.Namespaced, verbs: r.Verbs})
			}
		}
	}
	slices.SortFunc(c.resources, func(a, b servedResource) int { return compareGVR(a.gvr, b.gvr) })
	if c.dynamic, err = dynamic.NewForConfig(cfg.REST); err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	if c.metadata, err = metadata.NewForConfig(cfg.REST); err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	c.factory = metadatainformer.NewSharedInformerFactory(c.metadata, 0)
	return c, nil
}

func containsSlash(s string) bool { return strings.Contains(s, "/") }

func compareGVR(a, b schema.GroupVersionResource) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Version, b.Version), strings.Compare(a.Resource, b.Resource))
}

// resource returns the served resource of gvr.
func (c *clients) resource(gvr schema.GroupVersionResource) (servedResource, bool) {
	for _, r := range c.resources {
		if r.gvr == gvr {
			return r, true
		}
	}
	return servedResource{}, false
}

// newQueue returns a rate-limited work queue on the controllers' clock: failed items come back
// after 5 ms, doubling up to 1000 s, as client-go's default controller rate limiter.
func newQueue[T comparable](c *clients, name string) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name, Clock: c.clock})
}

// runWorker takes items off q and syncs them until q shuts down: an error puts the item back,
// rate limited; success forgets its failures.
func runWorker[T comparable](ctx context.Context, c *clients, name string, q workqueue.TypedRateLimitingInterface[T], sync func(context.Context, T) error) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(ctx, item); err != nil {
			if ctx.Err() == nil {
				c.logger.Warn("controller sync failed", "controller", name, "item", fmt.Sprint(item), "err", err)
			}
			q.AddRateLimited(item)
		} else {
			q.Forget(item)
		}
		q.Done(item)
	}
}

// metaOf returns the object metadata an informer event carries, including a deleted object's
// last state.
func metaOf(obj any) (*metav1.PartialObjectMetadata, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return m, ok
}
