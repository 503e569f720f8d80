package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const cmPath = "/api/v1/namespaces/default/configmaps"

// newChain starts a chain that logs nothing and closes it when the test ends.
func newChain(t *testing.T, cfg chain.Config) *chain.Chain {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.DiscardLogger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	c, err := chain.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	return c
}

// client is an HTTP client whose connections the test closes when it ends.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// create POSTs a configmap and returns its resourceVersion.
func create(t *testing.T, hc *http.Client, c *chain.Chain, name string) string {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"v"}}`, name)
	resp, err := hc.Post(c.URL()+cmPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var obj struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if resp.StatusCode != http.StatusCreated {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", name, resp.StatusCode, data)
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		t.Fatal(err)
	}
	return obj.Metadata.ResourceVersion
}

// list GETs the configmaps and returns their names and the list's resourceVersion.
func list(t *testing.T, hc *http.Client, c *chain.Chain) (string, string) {
	t.Helper()
	resp, err := hc.Get(c.URL() + cmPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
		Items    []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range l.Items {
		names = append(names, i.Metadata.Name)
	}
	return strings.Join(names, ","), l.Metadata.ResourceVersion
}

// openWatch starts a watch of the configmaps from rv; its frames arrive on the channel, which is
// closed when the stream ends, after the stream's end (nil for a clean one) is sent on ended.
func openWatch(t *testing.T, hc *http.Client, c *chain.Chain, rv string) (<-chan watchclient.Frame, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := hc.Do(mustRequest(t, ctx, c.URL()+cmPath+"?watch=true&resourceVersion="+rv))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("watch: %s", resp.Status)
	}
	frames, ended := make(chan watchclient.Frame, 100), make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(frames)
		dec := watchclient.NewDecoder(resp.Body)
		for {
			f, err := dec.Decode()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				ended <- err
				return
			}
			frames <- f
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return frames, ended
}

func mustRequest(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func nextFrame(t *testing.T, frames <-chan watchclient.Frame, ended <-chan error) watchclient.Frame {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatalf("the watch ended (%v) where an event was expected", <-ended)
		}
		return f
	case <-t.Context().Done():
	}
	return watchclient.Frame{}
}

// expectEvent reads the next frame and checks its type and object.
func expectEvent(t *testing.T, frames <-chan watchclient.Frame, ended <-chan error, typ apiwatch.EventType, name string) {
	t.Helper()
	f := nextFrame(t, frames, ended)
	_, m, err := f.Meta()
	if err != nil || f.Type != typ || m.Name != name {
		t.Fatalf("event %s %s (%v), want %s %s", f.Type, m.Name, err, typ, name)
	}
}

// expectServes shows a chain serving: a write, a list that has it, and a watch that sees the next.
func expectServes(t *testing.T, c *chain.Chain) {
	t.Helper()
	hc := client(t)
	rv := create(t, hc, c, "a")
	frames, ended := openWatch(t, hc, c, rv)
	create(t, hc, c, "b")
	expectEvent(t, frames, ended, apiwatch.Added, "b")
	names, listRV := list(t, hc, c)
	if names != "a,b" || listRV != strconv.FormatInt(c.Store().Rev(), 10) {
		t.Errorf("list %q at %s, want a,b at the store's revision %d", names, listRV, c.Store().Rev())
	}
}

func TestChainServes(t *testing.T) {
	c := newChain(t, chain.Config{})
	for _, r := range httpwatch.DefaultResources() {
		name := r.GroupResource().String()
		if slices.Contains(chain.DefaultUncached(), name) {
			continue // TestChainEventsUncached
		}
		if c.Storage(name) == nil || c.Cacher(name) == nil || !c.Cacher(name).Ready() {
			t.Errorf("%s: storage %v, cacher %v: want both, the cache ready", name, c.Storage(name), c.Cacher(name))
		}
	}
	if c.Storage("nonexistent") != nil || c.Cacher("nonexistent") != nil {
		t.Error("parts of a resource the chain does not serve")
	}
	if c.Client() == nil || c.API() == nil || !strings.HasPrefix(c.URL(), "http://127.0.0.1:") {
		t.Errorf("client %v, API %v, URL %q", c.Client(), c.API(), c.URL())
	}
	expectServes(t, c)
}

// TestChainSystemNamespaces: with SystemNamespaces the chain creates the namespaces kube-apiserver
// creates, and keeps those a given store already has, and a create in a namespace that does not
// exist is 404 as NamespaceLifecycle answers it; without namespaces served, or without the option,
// it writes nothing and such a create succeeds.
func TestChainSystemNamespaces(t *testing.T) {
	st := store.New(store.Options{})
	t.Cleanup(func() { st.Close() })
	c := newChain(t, chain.Config{Store: st, SystemNamespaces: true})
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		resp, err := st.Range(&store.RangeRequest{Key: []byte("/registry/namespaces/" + name)})
		if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"phase":"Active"`) {
			t.Errorf("namespace %s: %v %v", name, resp, err)
		}
	}
	hc := client(t)
	postInMissing := func(c *chain.Chain) int {
		t.Helper()
		resp, err := hc.Post(c.URL()+"/api/v1/namespaces/missing/configmaps", "application/json", strings.NewReader(`{"metadata":{"name":"x"}}`))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && !strings.Contains(string(data), `namespaces \"missing\" not found`) {
			t.Errorf("404 for the missing namespace: %s", data)
		}
		return resp.StatusCode
	}
	if code := postInMissing(c); code != http.StatusNotFound {
		t.Errorf("a create in a missing namespace: %d, want 404", code)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rev := st.Rev()
	newChain(t, chain.Config{Store: st, SystemNamespaces: true}) // a second chain over the same store
	if st.Rev() != rev {
		t.Errorf("existing namespaces rewritten: revision %d -> %d", rev, st.Rev())
	}
	other := newChain(t, chain.Config{Resources: []httpwatch.Resource{httpwatch.ConfigMaps()}, SystemNamespaces: true})
	if other.Store().Rev() != 1 {
		t.Errorf("namespaces not served, yet the store was written: revision %d", other.Store().Rev())
	}
	plain := newChain(t, chain.Config{})
	if plain.Store().Rev() != 1 {
		t.Errorf("without SystemNamespaces the store was written: revision %d", plain.Store().Rev())
	}
	if code := postInMissing(plain); code != http.StatusCreated {
		t.Errorf("without SystemNamespaces, a create in a missing namespace: %d, want 201", code)
	}
}

func TestChainUncached(t *testing.T) {
	t.Run("one", func(t *testing.T) {
		c := newChain(t, chain.Config{Uncached: []string{"configmaps"}})
		if c.Cacher("configmaps") != nil || c.Cacher("pods") == nil || c.Storage("configmaps") == nil {
			t.Errorf("configmaps cacher %v, pods cacher %v: want only pods cached", c.Cacher("configmaps"), c.Cacher("pods"))
		}
		expectServes(t, c)
	})
	t.Run("all", func(t *testing.T) {
		c := newChain(t, chain.Config{DisableWatchCache: true, Resources: []httpwatch.Resource{httpwatch.ConfigMaps(), httpwatch.Widgets()}})
		if c.Cacher("configmaps") != nil || c.Cacher("widgets.example.com") != nil || c.Storage("widgets.example.com") == nil || c.Storage("pods") != nil {
			t.Error("DisableWatchCache: a cacher, or the wrong resources")
		}
		expectServes(t, c)
	})
}

// TestChainEventsUncached: as kube-apiserver, the chain serves both versions of events from their
// etcd3 storage, so a GET with a malformed resourceVersion is the storage's 400 (a watch cache
// answers 500); Cached gives them a cache, and naming a resource not uncached by default in it is
// refused.
func TestChainEventsUncached(t *testing.T) {
	c := newChain(t, chain.Config{})
	for _, name := range []string{"events", "events.events.k8s.io"} {
		if c.Cacher(name) != nil || c.Storage(name) == nil {
			t.Errorf("%s: cached %t, storage %t: want only the storage", name, c.Cacher(name) != nil, c.Storage(name) != nil)
		}
	}
	hc := client(t)
	for _, path := range []string{"/api/v1/namespaces/default/events/e", "/apis/events.k8s.io/v1/namespaces/default/events/e"} {
		resp, err := hc.Get(c.URL() + path + "?resourceVersion=x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		const want = `invalid resource version: resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax`
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(want)) {
			t.Errorf("GET %s?resourceVersion=x: %d %s, want 400 %s", path, resp.StatusCode, body, want)
		}
	}

	cached := newChain(t, chain.Config{Cached: []string{"events"}})
	if cached.Cacher("events") == nil || cached.Cacher("events.events.k8s.io") != nil {
		t.Errorf("Cached events: core cached %t, events.k8s.io cached %t: want only core's", cached.Cacher("events") != nil, cached.Cacher("events.events.k8s.io") != nil)
	}
	for _, names := range [][]string{{"configmaps"}, {"nodes"}} {
		_, err := chain.New(t.Context(), chain.Config{Cached: names})
		if !errors.Is(err, chain.ErrInvalidConfig) {
			t.Errorf("Cached %v: %v, want ErrInvalidConfig", names, err)
		}
	}
}

// countingStorage counts the watches and lists made through it.
type countingStorage struct {
	storage.Interface
	watches, lists atomic.Int64
}

func (s *countingStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	s.watches.Add(1)
	return s.Interface.Watch(ctx, key, opts)
}

func (s *countingStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, out runtime.Object) error {
	s.lists.Add(1)
	return s.Interface.GetList(ctx, key, opts, out)
}

type countingServed struct {
	storage.Interface
	lists atomic.Int64
}

func (s *countingServed) GetList(ctx context.Context, key string, opts storage.ListOptions, out runtime.Object) error {
	s.lists.Add(1)
	return s.Interface.GetList(ctx, key, opts, out)
}

func TestChainHooks(t *testing.T) {
	under := map[string]*countingStorage{}
	served := map[string]*countingServed{}
	var requests atomic.Int64
	c := newChain(t, chain.Config{
		Uncached: []string{"pods"},
		WrapStorage: func(r httpwatch.Resource, s *watch.Store) storage.Interface {
			w := &countingStorage{Interface: s}
			under[r.GroupResource().String()] = w
			return w
		},
		WrapServed: func(r httpwatch.Resource, s storage.Interface) storage.Interface {
			w := &countingServed{Interface: s}
			served[r.GroupResource().String()] = w
			return w
		},
		WrapHandler: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				h.ServeHTTP(w, r)
			})
		},
	})
	if n := len(httpwatch.DefaultResources()); len(under) != n || len(served) != n {
		t.Fatalf("hooks called for %d and %d resources, want %d", len(under), len(served), n)
	}
	// Each cache's reflector lists and watches through WrapStorage.
	for _, name := range []string{"configmaps", "widgets.example.com"} {
		if w := under[name]; w.lists.Load() == 0 {
			t.Errorf("%s: the reflector did not list through WrapStorage", name)
		}
		testutil.WaitFor(t, name+"'s reflector to watch through WrapStorage", func() bool { return under[name].watches.Load() > 0 })
	}
	hc := client(t)
	for _, path := range []string{cmPath, "/api/v1/pods"} {
		resp, err := hc.Get(c.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// A list of the uncached pods goes through both hooks, one of the cached configmaps through
	// WrapServed to the cache.
	if served["configmaps"].lists.Load() != 1 || served["pods"].lists.Load() != 1 || under["pods"].lists.Load() != 1 {
		t.Errorf("lists through WrapServed: configmaps %d, pods %d; through WrapStorage: pods %d; want 1 each",
			served["configmaps"].lists.Load(), served["pods"].lists.Load(), under["pods"].lists.Load())
	}
	if requests.Load() != 2 {
		t.Errorf("WrapHandler saw %d requests, want 2", requests.Load())
	}
}

func TestChainCloseLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c, err := chain.New(t.Context(), chain.Config{Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// An open watch, and an idle keep-alive connection from the write.
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	rv := create(t, hc, c, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := hc.Do(mustRequest(t, ctx, c.URL()+cmPath+"?watch=true&resourceVersion="+rv))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", resp, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The watch was cut; its body ends.
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	if _, err := c.Store().Put(&store.PutRequest{Key: []byte("k")}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("the chain's own store after Close: %v, want closed", err)
	}
	goleak.VerifyNone(t, before)
}

func TestChainKeepsGivenStore(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	c, err := chain.New(t.Context(), chain.Config{Store: st, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store() != st {
		t.Fatal("Store is not the given store")
	}
	hc := client(t)
	create(t, hc, c, "a")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Range(&store.RangeRequest{Key: []byte("/registry/configmaps/default/a")}); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the given store after Close: %v, %v; want the written configmap", r, err)
	}
	if _, err := st.Put(&store.PutRequest{Key: []byte("k")}); err != nil {
		t.Errorf("the given store after Close: %v, want open", err)
	}
	if _, err := chain.New(t.Context(), chain.Config{Store: st, StoreOptions: store.Options{MaxTxnOps: 1}}); !errors.Is(err, chain.ErrInvalidConfig) {
		t.Errorf("Store and StoreOptions: %v, want ErrInvalidConfig", err)
	}
}

func TestChainShutdown(t *testing.T) {
	c := newChain(t, chain.Config{})
	hc := client(t)
	rv := create(t, hc, c, "a")
	frames, ended := openWatch(t, hc, c, rv)
	create(t, hc, c, "b")
	expectEvent(t, frames, ended, apiwatch.Added, "b")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The watch ends cleanly, with nothing more.
	if f, ok := <-frames; ok {
		t.Errorf("frame %s after Shutdown", f.Type)
	}
	if err := <-ended; err != nil {
		t.Errorf("the watch ended with %v, want a clean end", err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Shutdown")
	}
	if c.Err() != nil {
		t.Errorf("Err after Shutdown = %v", c.Err())
	}
	// The storage still runs until Close.
	if r, err := c.Client().Get(ctx, "/registry/configmaps/default/b"); err != nil || len(r.Kvs) != 1 {
		t.Errorf("etcd after Shutdown: %v %v", r, err)
	}
}

// failingStorage fails every list, so that a cache over it never becomes ready.
type failingStorage struct{ storage.Interface }

func (failingStorage) GetList(context.Context, string, storage.ListOptions, runtime.Object) error {
	return errors.New("injected list failure")
}

func TestChainNewFailureReleases(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bad := httpwatch.Resource{Version: "v1", Resource: "bads", Kind: "Bad", KeyPrefix: "no-slash"}
	cases := []struct {
		name string
		ctx  context.Context
		cfg  chain.Config
		want string
		is   error
	}{
		{"uncached unknown", t.Context(), chain.Config{Uncached: []string{"nodes"}}, `Uncached names "nodes"`, chain.ErrInvalidConfig},
		{"API resources", t.Context(), chain.Config{API: httpwatch.Config{Resources: []httpwatch.ServedResource{{Resource: httpwatch.Pods()}}}}, "API.Resources set", chain.ErrInvalidConfig},
		{"etcd3 storage", t.Context(), chain.Config{Resources: []httpwatch.Resource{httpwatch.ConfigMaps(), bad}}, "the etcd3 storage of bads: resourcePrefix needs to start from /", nil},
		{"cache never ready", cancelled, chain.Config{WrapStorage: func(r httpwatch.Resource, s *watch.Store) storage.Interface {
			if r.Resource == "pods" {
				return failingStorage{s}
			}
			return s
		}}, "never became ready", context.Canceled},
		{"HTTP API", t.Context(), chain.Config{API: httpwatch.Config{MinRequestTimeout: -1}}, "the HTTP API: ", httpwatch.ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			st := store.New(store.Options{})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			cfg := tc.cfg
			cfg.Store, cfg.Listener, cfg.Logger = st, lis, testutil.DiscardLogger()
			c, err := chain.New(tc.ctx, cfg)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("New = %v, want an error with %q matching %v", err, tc.want, tc.is)
			}
			if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the given listener after a failed New: Accept = %v, want closed", err)
			}
			if _, err := st.Put(&store.PutRequest{Key: []byte("k")}); err != nil {
				t.Errorf("the given store after a failed New: %v, want open", err)
			}
			st.Close()
			goleak.VerifyNone(t, before)
		})
	}
}

// failingListener fails its second Accept for good.
type failingListener struct {
	net.Listener
	accepts atomic.Int64
}

var errAccept = errors.New("injected accept failure")

func (l *failingListener) Accept() (net.Conn, error) {
	if l.accepts.Add(1) > 1 {
		return nil, errAccept
	}
	return l.Listener.Accept()
}

func TestChainServeFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := newChain(t, chain.Config{Listener: &failingListener{Listener: lis}})
	// The first connection is accepted and served; then the listener fails.
	resp, err := client(t).Get(c.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(body, []byte("ok")) {
		t.Errorf("healthz: %q", body)
	}
	<-c.Done()
	if !errors.Is(c.Err(), errAccept) {
		t.Errorf("Err = %v, want the listener's failure", c.Err())
	}
}

// TestCacheConfigIndexesPodsByNodeName: the chain builds each resource's storage under its key prefix
// and its watch cache with its key function and trigger index, as the kube-apiserver's pod storage
// (pkg/registry/core/pod/storage/storage.go) indexes pods by spec.nodeName (NodeNameTriggerFunc);
// other resources have no index. Failure mode: pods without the trigger, whose kubelet watches are
// offered every pod of the cluster, or objects keyed outside the storage's prefix.
func TestCacheConfigIndexesPodsByNodeName(t *testing.T) {
	if got := chain.StorageConfig(httpwatch.Pods()).ResourcePrefix; got != "/pods" {
		t.Errorf("pods' storage prefix: %q", got)
	}
	cfg := chain.CacheConfig(httpwatch.Pods(), nil)
	fn, ok := cfg.IndexerFuncs["spec.nodeName"]
	if !ok || len(cfg.IndexerFuncs) != 1 {
		t.Fatalf("pods' cache indexers: %v", cfg.IndexerFuncs)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "default"}, "spec": map[string]any{"nodeName": "n1"}}}
	if got := fn(pod); got != "n1" {
		t.Errorf("trigger value of a pod on n1: %q", got)
	}
	if key, err := cfg.KeyFunc(pod); err != nil || key != "/pods/default/p" {
		t.Errorf("KeyFunc(pod) = %q, %v; want /pods/default/p", key, err)
	}
	if got := chain.CacheConfig(httpwatch.ConfigMaps(), nil).IndexerFuncs; got != nil {
		t.Errorf("configmaps' cache indexers: %v", got)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "n"}}}
	if key, err := chain.CacheConfig(httpwatch.Namespaces(), nil).KeyFunc(ns); err != nil || key != "/namespaces/n" {
		t.Errorf("KeyFunc(namespace) = %q, %v; want /namespaces/n", key, err)
	}
}

// TestChainServiceKeys: services are kept at kube-apiserver's key, /registry/services/specs/, and
// an update of another uid names that key, as kube-apiserver's 409 does.
func TestChainServiceKeys(t *testing.T) {
	c := newChain(t, chain.Config{})
	hc := client(t)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, c.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	if code, body := do("POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"svc"},"spec":{"ports":[{"port":80}]}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	resp, err := c.Store().Range(&store.RangeRequest{Key: []byte("/registry/services/specs/default/svc")})
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("the service at /registry/services/specs/default/svc: %v %v", resp, err)
	}
	code, body := do("PUT", "/api/v1/namespaces/default/services/svc", `{"metadata":{"name":"svc","uid":"other"},"spec":{"ports":[{"port":81}]}}`)
	if code != http.StatusConflict || !strings.Contains(body, "Key: /registry/services/specs/default/svc,") {
		t.Errorf("an update of another uid: %d %s; want 409 naming the key", code, body)
	}
}
