package chain_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
)

// TestChainCacheFreshWhileUncachedWatchWaits: a watch-list of the uncached events opens its etcd
// watch at the list's revision plus one, the store's current revision plus one when nothing is
// written afterwards, and etcd answers no RequestProgress on that watch's gRPC stream until the
// store reaches it. Each etcd3 storage has its own client, so its own streams, as kube-apiserver's:
// a GET of a cached namespace at the store's current revision, for which the namespaces cache asks
// for progress, is answered without any write, whether the events watch is still open or was closed
// right after its initial-events-end bookmark (which goes out before the etcd watch is created, so
// that its etcd watcher may outlive it until a write under /registry/events/).
func TestChainCacheFreshWhileUncachedWatchWaits(t *testing.T) {
	for _, keepOpen := range []bool{true, false} {
		t.Run(fmt.Sprintf("open=%t", keepOpen), func(t *testing.T) {
			c := newChain(t, chain.Config{Resources: httpwatch.BuiltInResources(), SystemNamespaces: true})
			hc := client(t)
			post := func(path, body string) {
				t.Helper()
				resp, err := hc.Post(c.URL()+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("POST %s: %d %s", path, resp.StatusCode, data)
				}
			}
			post("/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`)
			for i := range 3 {
				post("/api/v1/namespaces/a/events", fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e%d"},`+
					`"involvedObject":{"kind":"Pod","name":"p","namespace":"a"},"message":"m"}`, i))
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := hc.Do(mustRequest(t, ctx, c.URL()+"/api/v1/namespaces/a/events?watch=true&sendInitialEvents=true"+
				"&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			dec := watchclient.NewDecoder(resp.Body)
			for added := 0; ; {
				f, err := dec.Decode()
				if err != nil {
					t.Fatalf("the events watch-list ended (%v) before its initial-events-end bookmark", err)
				}
				_, m, _ := f.Meta()
				if f.Type == apiwatch.Added {
					added++
				}
				if f.Type == apiwatch.Bookmark && m.Annotations["k8s.io/initial-events-end"] == "true" {
					if added != 3 {
						t.Fatalf("%d initial events, want 3", added)
					}
					break
				}
			}
			if !keepOpen {
				cancel()
				resp.Body.Close()
			}

			rev := c.Store().Rev()
			url := c.URL() + "/api/v1/namespaces/a?resourceVersion=" + strconv.FormatInt(rev, 10)
			var last string
			err = testutil.Poller{Interval: 10 * time.Millisecond}.Poll("GET "+url+" answered 200", func() bool {
				r, err := hc.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(r.Body)
				r.Body.Close()
				last = fmt.Sprintf("%d %s", r.StatusCode, body)
				return r.StatusCode == http.StatusOK
			})
			if err != nil {
				t.Fatalf("%v; last answer %s", err, last)
			}
			if got := c.Store().Rev(); got != rev {
				t.Errorf("the store was written meanwhile: revision %d -> %d", rev, got)
			}
		})
	}
}
