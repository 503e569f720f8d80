package kube

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/chain"
)

// TestConfigValidate: a config out of range is refused, naming the field.
func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Clients: 0}, {Clients: 1, Watchers: -1}, {Clients: 1, Ops: -1}, {Clients: 1, Duration: -1},
		{Clients: 1, Objects: -1}, {Clients: 1, RequestTimeout: -1}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err %v, want ErrInvalidConfig", c, err)
		}
	}
	if err := (Config{Clients: 1}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}

// TestRecorderRecords: the recorder records what the wire said: a create, a 409, a 404, a list,
// a watch's frames and its stop; a request with no answer is recorded unknown and its error wraps
// ErrNoAnswer.
func TestRecorderRecords(t *testing.T) {
	rc := startChain(t, chain.Config{})
	ctx := context.Background()
	res, err := Discover(ctx, rc, configMaps)
	if err != nil {
		t.Fatal(err)
	}
	res.Namespace = "rec"
	rec, err := NewRecorder(rc, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, err := rec.ReadInitial(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rec.Watch(ctx, 9, ListOptions{ResourceVersion: rec.History().Initial.ResourceVersion}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := &Object{Name: "x", Labels: map[string]string{bucketLabel: "a"}, Annotations: map[string]string{WriteAnnotation: "t-1"}}
	got, err := rec.Create(ctx, 0, o)
	if err != nil || got.UID == "" || got.ResourceVersion == "" {
		t.Fatalf("create: %v, %+v", err, got)
	}
	var st *Status
	if _, err := rec.Create(ctx, 0, o); !errors.As(err, &st) || st.Code != 409 || st.Reason != "AlreadyExists" {
		t.Errorf("second create: %v", err)
	}
	if _, err := rec.Delete(ctx, 0, "missing", nil); !errors.As(err, &st) || st.Code != 404 {
		t.Errorf("delete of a missing object: %v", err)
	}
	if _, err := rec.List(ctx, 0, ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	f, err := w.Next()
	if err != nil || f.Type != Added || f.Object.Name != "x" {
		t.Errorf("watch frame %+v, %v", f, err)
	}
	w.Stop()
	h := rec.History()
	if len(h.Operations) != 4 || h.Operations[1].Status != 409 || h.Operations[2].Status != 404 || h.Operations[3].List == nil {
		t.Errorf("operations %+v", h.Operations)
	}
	if ww := h.Watches[0]; len(ww.Frames) != 1 || ww.EndReason != EndStopped || ww.Status != 200 {
		t.Errorf("watch %+v", ww)
	}
	if r := mustCheck(t, h); !r.OK() {
		t.Errorf("recorded history: %v", r.Violations)
	}

	// a server that is gone
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	gone, err := NewRecorder(&rest.Config{Host: "http://" + addr}, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Create(ctx, 0, o); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("create to nowhere: %v", err)
	}
	if op := gone.History().Operations[0]; !op.Unknown {
		t.Errorf("unanswered create recorded %+v", op)
	}
	gone.Close()
}

// TestRecorderRefuses: bad resources are refused with ErrInvalidConfig: an incomplete one, one the
// server does not serve, a cluster-scoped one.
func TestRecorderRefuses(t *testing.T) {
	if _, err := NewRecorder(&rest.Config{Host: "http://127.0.0.1:1"}, Resource{Version: "v1", Resource: "configmaps"}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no namespace: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"nodes","namespaced":false,"kind":"Node","verbs":["get"]}]}`))
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	rc := &rest.Config{Host: srv.URL}
	for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "nodes"}, {Version: "v1", Resource: "pods"}} {
		if _, err := Discover(context.Background(), rc, gvr); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v", gvr, err)
		}
	}
	c, _, _ := httpClientFor(rc)
	c.CloseIdleConnections()
}
