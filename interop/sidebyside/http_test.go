package sidebyside

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/benchwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/store"
)

// The HTTP workload: 100 widgets (widgets.example.com/v1) in namespace ns, updated in turn by one
// writer; httpWatchers watches of the namespace's widgets on loopback read every update.
const (
	httpObjects  = 100
	httpWatchers = 1000
	widgetsPath  = "/apis/example.com/v1/namespaces/ns/widgets"
	// httpWarmUp is how many writes, made straight in the store, warm the watch cache up as on a busy
	// resource: within its 75 s window they grow the history so that new watchers' inputs hold 100
	// events on both servers (10 on a cold cache, where any backlog of more than ten events would
	// close a watcher).
	httpWarmUp = 10000
)

// apiServer is one side of the HTTP benchmark: a Kubernetes API serving widgets over its own
// listwatch store, served by listwatch (chain.New) or by upstream's apiextensions-apiserver
// (kubeapiserver.Start) through listwatch's etcd API on loopback. Both keep widgets behind a watch
// cache; only the API server differs.
type apiServer struct {
	name string
	url  string
	st   *store.Store
	// keyPrefix is where the server stores the namespace's widgets.
	keyPrefix string
	stop      func()
}

func startListwatchAPI(b testing.TB) *apiServer {
	st := store.New(store.Options{})
	c, err := chain.New(context.Background(), chain.Config{Store: st, Resources: []httpwatch.Resource{httpwatch.Widgets()}, Logger: testutil.DiscardLogger()})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	return &apiServer{name: "listwatch", url: c.URL(), st: st, keyPrefix: "/registry/widgets/ns/", stop: func() {
		c.Close()
		st.Close()
	}}
}

func startUpstreamAPI(b testing.TB) *apiServer {
	opts := etcdgrpc.Options{}.WithDefaults()
	st := store.New(store.Options{MinLeaseTTL: etcdtest.MinLeaseTTL, MemberID: opts.MemberID})
	endpoint, stopEtcd, err := kubeapiserver.ServeEtcdAPI(st, opts)
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	s, err := kubeapiserver.Start(context.Background(), kubeapiserver.Options{
		EtcdEndpoints: []string{endpoint}, CRDs: []*apiextensionsv1.CustomResourceDefinition{kubeapiserver.WidgetsCRD()},
	})
	if err != nil {
		stopEtcd()
		st.Close()
		b.Fatal(err)
	}
	return &apiServer{name: "upstream", url: s.URL(), st: st, keyPrefix: "/registry/example.com/widgets/ns/", stop: func() {
		if err := s.Stop(); err != nil {
			b.Error(err)
		}
		stopEtcd()
		st.Close()
	}}
}

var apiServers = map[string]func(testing.TB) *apiServer{"listwatch": startListwatchAPI, "upstream": startUpstreamAPI}

// httpSides are the servers BenchmarkHTTPFanout runs: both, or those SIDEBYSIDE_HTTP_SIDES names
// (comma-separated), to profile one alone.
func httpSides(b *testing.B) []string { return sidesFrom(b, "SIDEBYSIDE_HTTP_SIDES") }

// widget is the JSON of widget i at write seq.
func widget(i, seq int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d","namespace":"ns"},"spec":{"seq":"%d","pad":"%0100d"}}`, i, seq, 0)
}

// do sends a request and returns the status and body.
func do(client *http.Client, method, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// prepare creates the widgets through the API, warms the cache up, and returns the stored value of
// each widget (as JSON fields) and the store's revision, after which the watches start. Upstream
// answers 429 for a moment after a CRD is served and sleeps 2 s in the first create after it
// (kubeapiserver's doc): creates are retried for up to a minute.
func (s *apiServer) prepare(b *testing.B, client *http.Client) ([]map[string]any, int64) {
	deadline := time.Now().Add(time.Minute)
	for i := range httpObjects {
		for {
			code, body, err := do(client, "POST", s.url+widgetsPath, widget(i, -1))
			if err == nil && code == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) || (err == nil && code != http.StatusTooManyRequests) {
				b.Fatalf("%s: create widget %d: %v %d %s", s.name, i, err, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	kvs, err := s.st.Range(&store.RangeRequest{Key: []byte(s.keyPrefix), RangeEnd: []byte(s.keyPrefix[:len(s.keyPrefix)-1] + "0")})
	if err != nil || len(kvs.Kvs) != httpObjects {
		b.Fatalf("%s: the widgets in the store under %s: %v (%d keys)", s.name, s.keyPrefix, err, len(kvs.Kvs))
	}
	stored := make([]map[string]any, httpObjects)
	for _, kv := range kvs.Kvs {
		i, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), s.keyPrefix+"w-"))
		if err != nil || i < 0 || i >= httpObjects {
			b.Fatalf("%s: unexpected key %q", s.name, kv.Key)
		}
		if err := json.Unmarshal(kv.Value, &stored[i]); err != nil {
			b.Fatalf("%s: the stored %s is not JSON: %v", s.name, kv.Key, err)
		}
	}
	for i := range httpWarmUp {
		kv := kvs.Kvs[i%len(kvs.Kvs)]
		if _, err := s.st.Put(&store.PutRequest{Key: kv.Key, Value: kv.Value}); err != nil {
			b.Fatal(err)
		}
	}
	rev := s.st.Rev()
	// A list not older than the last write is served by the cache once it has caught up; upstream's
	// waits 3 s at most, so it is asked again until then.
	for {
		code, body, err := do(client, "GET", s.url+widgetsPath+"?resourceVersionMatch=NotOlderThan&resourceVersion="+strconv.FormatInt(rev, 10), nil)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: list after the warm-up: %v %d %.200s", s.name, err, code, body)
		}
	}
	return stored, rev
}

// httpRun is one side's run of the HTTP workload. The writes go straight to the store, as another
// apiserver's would, so that both servers see the same stream of etcd events at the same rate
// whatever their write path costs: the benchmark measures the watch path, from the etcd event to
// the client.
func httpRun(b *testing.B, name string, rate int) benchwatch.Result {
	s := apiServers[name](b)
	defer s.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	stored, startRV := s.prepare(b, client)
	write := func(i int) error {
		o := i % httpObjects
		obj := stored[o]
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			return fmt.Errorf("stored widget %d has no spec: %v", o, obj)
		}
		spec["seq"] = strconv.Itoa(i)
		value, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = s.st.Put(&store.PutRequest{Key: []byte(s.keyPrefix + "w-" + strconv.Itoa(o)), Value: value})
		return err
	}
	settle()
	r, err := benchwatch.Fanout(benchwatch.Config{
		Addr: strings.TrimPrefix(s.url, "http://"), Path: widgetsPath + "?watch=true&resourceVersion=" + strconv.FormatInt(startRV, 10),
		StartRV: startRV, Watchers: httpWatchers, Writes: b.N, Rate: rate, Write: write,
	})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return r
}

// floorFrameBytes is the size of the floor's frames: listwatch's average frame (else upstream's), so
// that the floor moves the same bytes as the servers it is compared with.
func floorFrameBytes(results map[string]benchwatch.Result) int {
	for _, name := range []string{"listwatch", "upstream"} {
		if n := results[name].BytesPerEvent(); n > 0 {
			return n
		}
	}
	return benchwatch.FloorFrameBytes
}

// BenchmarkHTTPFanout: b.N updates of widgets, written to each server's store at rate writes/s
// (httpRun says why not through the API), each delivered to 1000 watches of the namespace on
// loopback, read by minimal clients that check every stream (benchwatch.Fanout); and, for scale,
// benchwatch.Floor's loopback floor with the same watchers, rate, events and frame size
// (floorFrameBytes). For each server it reports events/s, p50/p99 write-to-receipt latency, the
// process's CPU per delivered event, bytes per event and watchers that fell short; then cpu-ratio
// (listwatch's CPU per event over upstream's) and floor-ratio (listwatch's over the floor's). A
// watcher that falls short (closed by the cache's dispatch budget, or a stream out of order) fails
// the benchmark, after its figures are logged.
//
//	go test -run '^$' -bench 'HTTPFanout/rate=300' -benchtime 3000x ./sidebyside/
func BenchmarkHTTPFanout(b *testing.B) {
	for _, rate := range []int{100, 300} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			var problems []string
			var metrics []benchwatch.Metric
			results := map[string]benchwatch.Result{}
			for _, name := range httpSides(b) {
				r := httpRun(b, name, rate)
				results[name] = r
				metrics = append(metrics, r.Metrics(name+"-")...)
				if p := r.Problem(); p != "" {
					problems = append(problems, name+": "+p)
				}
			}
			settle()
			floor, err := benchwatch.Floor(benchwatch.FloorConfig{Watchers: httpWatchers, Events: b.N, Rate: rate, Burst: 1,
				FrameBytes: floorFrameBytes(results)})
			if err != nil {
				b.Fatal(err)
			}
			perEvent := func(r benchwatch.Result) float64 { return float64(r.CPU.Nanoseconds()) / float64(max(r.Events, 1)) }
			metrics = append(metrics,
				benchwatch.Metric{Value: float64(floor.CPUPerEvent.Nanoseconds()), Unit: "floor-cpu-ns/event"},
				benchwatch.Metric{Value: floor.EventsPerWrite, Unit: "floor-events/chunk"},
				benchwatch.Metric{Value: float64(floor.Percentile(0.50)) / float64(time.Millisecond), Unit: "floor-p50-ms"},
				benchwatch.Metric{Value: float64(floor.Percentile(0.99)) / float64(time.Millisecond), Unit: "floor-p99-ms"})
			if lw, up := results["listwatch"], results["upstream"]; lw.Events > 0 && up.Events > 0 {
				metrics = append(metrics, benchwatch.Metric{Value: perEvent(lw) / perEvent(up), Unit: "cpu-ratio"})
			}
			if lw := results["listwatch"]; lw.Events > 0 {
				metrics = append(metrics, benchwatch.Metric{Value: perEvent(lw) / float64(floor.CPUPerEvent.Nanoseconds()), Unit: "floor-ratio"})
			}
			for _, m := range metrics {
				b.ReportMetric(m.Value, m.Unit)
			}
			if len(problems) > 0 {
				// A failed benchmark prints no metrics: they go to the log, on one line.
				var line []string
				for _, m := range metrics {
					line = append(line, fmt.Sprintf("%.4g %s", m.Value, m.Unit))
				}
				b.Logf("figures (not valid): %s", strings.Join(line, "  "))
				b.Error(strings.Join(problems, "\n"))
			}
		})
	}
}
