package httpdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
)

// The widgets: two namespaces, a few names, labels and a spec that updates change.
var (
	namespaces = []string{"a", "b"}
	names      = []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	apps       = []string{"", "x", "y"}
	labelSels  = []string{"", "app=x", "app!=x", "app in (x,y)", "!app", "app=", "app==x,"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// runner drives one seed: the same requests to both servers. It is the shared runner's peers
// (watch_test.go).
type runner struct {
	*diffrun.Runner[watchReq]
	ctx     context.Context
	servers [2]*server
	stats   stats
	serial  int
}

// stats are a seed's counts: the writes and reads here, the watches' in the shared runner's Tally.
type stats struct {
	diffrun.Tally
	writes, badWrites, lists, pages, gets int
}

func (s stats) String() string {
	return fmt.Sprintf("%d writes, %d refused writes, %d lists (%d further pages), %d gets, %d watches, %d events, "+
		"%d initial-events-end bookmarks, %d other bookmarks, %d ERRORs, %d resumes compared; %d watches ended during "+
		"their initial events started over (judged, not compared)", s.writes, s.badWrites, s.lists, s.pages, s.gets,
		s.Watches, s.Events, s.EndBookmarks, s.Bookmarks, s.Errors, s.Resumes, s.Restarts)
}

func (s *stats) Add(o stats) {
	s.Tally.Add(o.Tally)
	s.writes += o.writes
	s.badWrites += o.badWrites
	s.lists += o.lists
	s.pages += o.pages
	s.gets += o.gets
}

func key(ns, name string) string { return "/widgets/" + ns + "/" + name }

func collection(ns string) string {
	if ns == "" {
		return resourcePath + "/widgets"
	}
	return resourcePath + "/namespaces/" + ns + "/widgets"
}

// widget is the JSON of a widget with random labels and spec.
func (r *runner) widget(ns, name string, extra map[string]any) map[string]any {
	r.serial++
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	if app := pick(r.Rng, apps); app != "" {
		md["labels"] = map[string]any{"app": app}
	}
	for k, v := range extra {
		md[k] = v
	}
	return map[string]any{"apiVersion": group + "/" + version, "kind": "Widget", "metadata": md,
		"spec": map[string]any{"size": r.Rng.IntN(5), "serial": r.serial}}
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// call sends both servers the request built for each and compares the answers; it returns them.
func (r *runner) call(what, method string, path func(*server) string, body func(*server) []byte, contentType string, asked func(*server) string) [2]response {
	r.T.Helper()
	var out [2]response
	var desc [2]string
	for i, s := range r.servers {
		var b []byte
		if body != nil {
			b = body(s)
		}
		resp, err := s.do(r.ctx, method, path(s), contentType, b)
		if err != nil {
			r.Fatalf("%s: %s: %v", what, s.name, err)
		}
		out[i] = resp
		a := ""
		if asked != nil {
			a = asked(s)
		}
		desc[i] = s.describe(resp, a)
	}
	if desc[0] != desc[1] {
		r.Failf("%s: the answers differ (-kube +listwatch):\n%s", what, cmp.Diff(desc[0], desc[1]))
	}
	return out
}

func same(p string) func(*server) string { return func(*server) string { return p } }

// write makes the same write on both servers and records it in each server's model.
func (r *runner) write() {
	r.T.Helper()
	ns, name := pick(r.Rng, namespaces), pick(r.Rng, names)
	k := key(ns, name)
	cur := r.servers[0].h.State(k)
	switch {
	case cur == nil && r.Rng.IntN(8) == 0:
		r.createGenerated(ns)
	case cur == nil:
		body := encode(r.widget(ns, name, nil))
		resp := r.call("create of "+k, "POST", same(collection(ns)), func(*server) []byte { return body }, "application/json", nil)
		r.recordWrite(k, resp, 201)
	case r.Rng.IntN(4) == 0:
		var pre string
		if r.Rng.IntN(2) == 0 {
			pre = "resourceVersion"
		}
		resp := r.call("delete of "+k+" precondition="+pre, "DELETE", same(collection(ns)+"/"+name), func(s *server) []byte {
			if pre == "" {
				return nil
			}
			return encode(map[string]any{"preconditions": map[string]any{"resourceVersion": strconv.FormatInt(s.h.State(k).Rev, 10)}})
		}, "application/json", nil)
		r.recordDelete(k, resp)
	default:
		w := r.widget(ns, name, nil)
		resp := r.call("update of "+k, "PUT", same(collection(ns)+"/"+name), func(s *server) []byte {
			w["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatInt(s.h.State(k).Rev, 10)
			return encode(w)
		}, "application/json", nil)
		r.recordWrite(k, resp, 200)
	}
	r.stats.writes++
}

// createGenerated creates a widget with a generated name and deletes it at once: the servers
// generate different names, which the test maps to one name; deleting it before any read keeps
// the names' order, which differs, out of lists and initial events.
func (r *runner) createGenerated(ns string) {
	r.T.Helper()
	body := encode(r.widget(ns, "", map[string]any{"generateName": "g-"}))
	genName := fmt.Sprintf("gen%d", r.serial)
	var made [2]string
	for i, s := range r.servers {
		resp, err := s.do(r.ctx, "POST", collection(ns), "application/json", body)
		if err != nil || resp.code != 201 {
			r.Fatalf("%s: create with generateName: %v %d %s", s.name, err, resp.code, resp.raw)
		}
		md := resp.body["metadata"].(map[string]any)
		made[i] = md["name"].(string)
		if !strings.HasPrefix(made[i], "g-") {
			r.Failf("%s generated the name %q for generateName g-", s.name, made[i])
		}
		s.gen[made[i]] = genName
		o, err := objectOf(key(ns, made[i]), resp.body)
		if err != nil {
			r.T.Fatal(err)
		}
		if err := s.h.Apply(o.Rev, o.Key, o); err != nil {
			r.T.Fatal(err)
		}
		s.writes = append(s.writes, o.Rev)
	}
	r.stats.writes++
	var resps [2]response
	for i, s := range r.servers {
		resp, err := s.do(r.ctx, "DELETE", collection(ns)+"/"+made[i], "", nil)
		if err != nil {
			r.T.Fatal(err)
		}
		resps[i] = resp
	}
	for i, s := range r.servers {
		if a, b := r.servers[0].describe(resps[0], ""), s.describe(resps[i], ""); a != b {
			r.Failf("delete of the generated %s: the answers differ (-kube +listwatch):\n%s", genName, cmp.Diff(a, b))
		}
		r.applyDelete(s, key(ns, made[i]))
	}
	r.stats.writes++
}

// recordWrite records an acknowledged create or update in each server's model.
func (r *runner) recordWrite(k string, resp [2]response, code int) {
	r.T.Helper()
	for i, s := range r.servers {
		if resp[i].code != code {
			r.Fatalf("%s: the write of %s answered %d, want %d: %s", s.name, k, resp[i].code, code, resp[i].raw)
		}
		o, err := objectOf(k, resp[i].body)
		if err != nil {
			r.T.Fatal(err)
		}
		if err := s.h.Apply(o.Rev, k, o); err != nil {
			r.T.Fatal(err)
		}
		s.writes = append(s.writes, o.Rev)
	}
}

// recordDelete records an acknowledged deletion: its revision is the store's (the answer is a
// Status without one; nothing else writes to either store meanwhile).
func (r *runner) recordDelete(k string, resp [2]response) {
	r.T.Helper()
	for i, s := range r.servers {
		if resp[i].code != 200 {
			r.Fatalf("%s: the delete of %s answered %d: %s", s.name, k, resp[i].code, resp[i].raw)
		}
		r.applyDelete(s, k)
	}
}

func (r *runner) applyDelete(s *server, k string) {
	r.T.Helper()
	rev := s.st.Rev()
	if err := s.h.Apply(rev, k, nil); err != nil {
		r.T.Fatal(err)
	}
	s.writes = append(s.writes, rev)
}

// badWrite sends both servers the same write that must be refused and compares the answers.
func (r *runner) badWrite() {
	r.T.Helper()
	ns, name := pick(r.Rng, namespaces), pick(r.Rng, names)
	k := key(ns, name)
	exists := r.servers[0].h.State(k) != nil
	path := collection(ns) + "/" + name
	ctype := "application/json"
	var what, method string
	var p func(*server) string = same(path)
	var body func(*server) []byte
	switch n := r.Rng.IntN(11); {
	case n == 0 && exists:
		what, method, p = "create of the existing "+k, "POST", same(collection(ns))
		b := encode(r.widget(ns, name, nil))
		body = func(*server) []byte { return b }
	case n == 1:
		what, method, p = "create with an invalid name", "POST", same(collection(ns))
		b := encode(r.widget(ns, "Not_A_Name", nil))
		body = func(*server) []byte { return b }
	case n == 2:
		what, method, p = "create into another namespace than the body's", "POST", same(collection(ns))
		b := encode(r.widget("elsewhere", name, nil))
		body = func(*server) []byte { return b }
	case n == 3:
		what, method, p = "create with a body that is not JSON", "POST", same(collection(ns))
		body = func(*server) []byte { return []byte(`{"apiVersion":`) }
	case n == 4:
		what, method, p = "create of another kind", "POST", same(collection(ns))
		w := r.widget(ns, name, nil)
		w["kind"] = "Gadget"
		b := encode(w)
		body = func(*server) []byte { return b }
	case n == 5 && exists:
		what, method = "update of "+k+" with a stale resourceVersion", "PUT"
		w := r.widget(ns, name, nil)
		body = func(s *server) []byte {
			w["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatInt(s.h.State(k).Rev-1, 10)
			return encode(w)
		}
	case n == 6 && exists:
		what, method = "update of "+k+" without a resourceVersion", "PUT"
		b := encode(r.widget(ns, name, nil))
		body = func(*server) []byte { return b }
	case n == 7 && !exists:
		what, method = "update of the absent "+k, "PUT"
		w := r.widget(ns, name, map[string]any{"resourceVersion": "1"})
		b := encode(w)
		body = func(*server) []byte { return b }
	case n == 8 && exists:
		what, method = "delete of "+k+" with a wrong uid precondition", "DELETE"
		b := encode(map[string]any{"preconditions": map[string]any{"uid": "00000000-0000-0000-0000-000000000000"}})
		body = func(*server) []byte { return b }
	case n == 9 && exists:
		what, method = "delete of "+k+" with a stale resourceVersion precondition", "DELETE"
		body = func(s *server) []byte {
			return encode(map[string]any{"preconditions": map[string]any{"resourceVersion": strconv.FormatInt(s.h.State(k).Rev-1, 10)}})
		}
	case n == 10:
		what, method, p = "create as text/plain", "POST", same(collection(ns))
		b := encode(r.widget(ns, name, nil))
		body, ctype = func(*server) []byte { return b }, "text/plain"
	default:
		what, method = "delete of "+k, "DELETE"
		if exists {
			what, method = "get of "+k+" with a malformed resourceVersion", "GET"
			p = same(path + "?resourceVersion=x1")
		}
	}
	resp := r.call(what, method, p, body, ctype, nil)
	switch {
	case method == "DELETE" && resp[0].code == 200:
		r.recordDelete(k, resp)
		r.stats.writes++
	case resp[0].code < 300:
		if method != "GET" {
			r.Failf("%s: accepted with %d", what, resp[0].code)
		}
	default:
		r.stats.badWrites++
	}
}

// asked is the resourceVersion a request names, for each server: "", "0", "current" (the
// server's revision), a write ("w3": its resourceVersion), "future+N", or something malformed.
type asked string

func (a asked) on(s *server) string {
	switch {
	case a == "" || a == "0" || a == "x1":
		return string(a)
	case a == "current":
		return strconv.FormatInt(s.h.Rev, 10)
	case strings.HasPrefix(string(a), "future+"):
		n, _ := strconv.ParseInt(strings.TrimPrefix(string(a), "future+"), 10, 64)
		return strconv.FormatInt(s.h.Rev+n, 10)
	case strings.HasPrefix(string(a), "w"):
		n, _ := strconv.Atoi(strings.TrimPrefix(string(a), "w"))
		return strconv.FormatInt(s.writes[n-1], 10)
	}
	return string(a)
}

func (r *runner) resourceVersion() (asked, bool) {
	n := len(r.servers[0].writes)
	switch k := r.Rng.IntN(20); {
	case k < 4:
		return "", false
	case k < 8:
		return "0", false
	case k < 11:
		return "current", false
	case k < 17 && n > 0:
		return asked("w" + strconv.Itoa(1+r.Rng.IntN(n))), false
	case k < 19 && r.Future():
		return asked("future+" + strconv.Itoa(1+r.Rng.IntN(3))), true
	case k < 19:
		return "current", false
	default:
		return "x1", false
	}
}

// Sync brings both servers' caches to their store's revision with a consistent list of every
// widget, compared as any list, and moves each model to the revision listed.
func (r *runner) Sync() {
	r.T.Helper()
	resp := r.call("sync: consistent list of every widget", "GET", same(collection("")), nil, "", nil)
	for i, s := range r.servers {
		if resp[i].code != 200 {
			r.Fatalf("%s: the consistent list answered %d: %s", s.name, resp[i].code, resp[i].raw)
		}
		rv, err := strconv.ParseInt(resp[i].body["metadata"].(map[string]any)["resourceVersion"].(string), 10, 64)
		if err != nil {
			r.T.Fatal(err)
		}
		if err := s.h.Advance(rv); err != nil {
			r.T.Fatal(err)
		}
	}
	r.stats.lists++
}

// awaitCaches waits until each server's watch cache of the collection has seen its store's revision,
// by listing the collection at that resourceVersion with resourceVersionMatch NotOlderThan: the
// cache serves it once it is that fresh (upstream answers a 504 after 3 s if not; the list is
// sent again). A write tries first on the cache's copy of its object (CacheDelegator's
// GuaranteedUpdate and Delete) and keeps that try's warnings when the storage's current object
// sends it round again: a status patch with fieldValidation Warn of an object deleted just before
// warns on a cache that has not seen the deletion and not on one that has, and which one a write
// meets is each server's timing. Waiting makes every write meet a cache that has seen the writes
// before it. A collection a server does not serve (404) has no cache to wait for.
func (r *runner) awaitCaches(collection string) {
	r.T.Helper()
	for _, s := range r.servers {
		path := collection + "?resourceVersionMatch=NotOlderThan&resourceVersion=" + strconv.FormatInt(s.st.Rev(), 10)
		var last response
		err := testutil.Poll(s.name+"'s cache at "+path, func() bool {
			resp, err := s.do(r.ctx, "GET", path, "", nil)
			if err != nil {
				r.Fatalf("%s: %s: %v", s.name, path, err)
			}
			last = resp
			return resp.code != http.StatusGatewayTimeout && resp.code != http.StatusTooManyRequests
		}, nil)
		if err != nil {
			r.Fatalf("%v; the last answer: %d %.300s", err, last.code, last.raw)
		}
		switch last.code {
		case http.StatusOK:
		case http.StatusNotFound:
			// No such collection (a version not served): no cache to wait for. The request itself
			// compares both servers' answers.
		default:
			r.Fatalf("%s: the list waiting for its cache, %s, answered %d: %s", s.name, path, last.code, last.raw)
		}
	}
}

// collectionOf is the collection of an API path (/apis/<group>/<version>/[namespaces/<ns>/]<resource>
// or the core group's /api/v1/[namespaces/<ns>/]<resource>, then anything; a namespace's own path is
// in /api/v1/namespaces), without its query.
func collectionOf(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	n := 5
	if len(parts) > 1 && parts[1] == "api" {
		n = 4
	}
	// As upstream's RequestInfoFactory: namespaces/<ns> is a scope only when a resource follows it,
	// not a namespace's own status or finalize.
	if len(parts) > n+1 && parts[n-1] == "namespaces" && parts[n+1] != "status" && parts[n+1] != "finalize" {
		n += 2
	}
	return strings.Join(parts[:min(n, len(parts))], "/")
}

// list sends both servers the same random list and follows the continue tokens for a few pages.
func (r *runner) list() {
	r.T.Helper()
	r.Sync()
	ns := ""
	if r.Rng.IntN(3) > 0 {
		ns = pick(r.Rng, namespaces)
	}
	rv, _ := r.resourceVersion()
	q := url.Values{}
	match := pick(r.Rng, []string{"", "", "", "NotOlderThan", "Exact", "Newest"})
	limit := 0
	switch r.Rng.IntN(3) {
	case 0:
		limit = 1 + r.Rng.IntN(3)
	}
	if ls := pick(r.Rng, labelSels); ls != "" {
		q.Set("labelSelector", ls)
	}
	if fs := r.fieldSelector(); fs != "" {
		q.Set("fieldSelector", fs)
	}
	if match != "" {
		q.Set("resourceVersionMatch", match)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	// An unset resourceVersion is sometimes sent empty.
	emptyRV := rv == "" && r.Rng.IntN(2) == 0
	what := fmt.Sprintf("list of %s rv=%s (sent empty: %t) %s", collection(ns), rv, emptyRV, q.Encode())
	path := func(s *server) string {
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		if v := rv.on(s); v != "" || emptyRV {
			qq.Set("resourceVersion", v)
		}
		return collection(ns) + "?" + qq.Encode()
	}
	resp := r.call(what, "GET", path, nil, "", rv.on)
	r.stats.lists++
	for page := 2; page <= 4 && resp[0].code == 200 && resp[1].code == 200 && r.Rng.IntN(4) > 0; page++ {
		var tokens [2]string
		for i := range r.servers {
			tokens[i], _ = resp[i].body["metadata"].(map[string]any)["continue"].(string)
		}
		if tokens[0] == "" || tokens[1] == "" {
			return
		}
		withRV := r.Rng.IntN(8) == 0
		next := func(s *server) string {
			qq := url.Values{}
			for k, v := range q {
				qq[k] = v
			}
			qq.Del("resourceVersionMatch")
			qq.Set("continue", tokens[indexOf(r.servers, s)])
			if withRV {
				qq.Set("resourceVersion", strconv.FormatInt(s.h.Rev, 10))
			}
			return collection(ns) + "?" + qq.Encode()
		}
		resp = r.call(fmt.Sprintf("%s, page %d (with a resourceVersion: %t)", what, page, withRV), "GET", next, nil, "", nil)
		r.stats.pages++
	}
}

func indexOf(servers [2]*server, s *server) int {
	if servers[0] == s {
		return 0
	}
	return 1
}

func (r *runner) fieldSelector() string {
	switch r.Rng.IntN(8) {
	case 0:
		return "metadata.name=" + pick(r.Rng, names)
	case 1:
		return "metadata.namespace=" + pick(r.Rng, namespaces)
	case 2:
		return "metadata.name!=" + pick(r.Rng, names)
	case 3:
		return "spec.size=1"
	}
	return ""
}

// get sends both servers the same random get.
func (r *runner) get() {
	r.T.Helper()
	r.Sync()
	ns, name := pick(r.Rng, namespaces), pick(r.Rng, names)
	rv, _ := r.resourceVersion()
	path := func(s *server) string {
		p := collection(ns) + "/" + name
		if v := rv.on(s); v != "" {
			p += "?resourceVersion=" + url.QueryEscape(v)
		}
		return p
	}
	r.call(fmt.Sprintf("get of %s/%s rv=%s", ns, name, rv), "GET", path, nil, "", rv.on)
	r.stats.gets++
}
