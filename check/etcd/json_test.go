package etcd

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/check"
)

func TestExampleHistory(t *testing.T) {
	h := readExample(t)
	if got := h.Operations[2].Request.Put.Value; got != "\x00\xff" {
		t.Fatalf("base64 value decoded as %q", got)
	}
	res := wantOK(t, h)
	if len(res.Events) != 6 || res.Linearization[len(res.Linearization)-1] != 10 {
		t.Fatalf("reference %d events, linearization %v", len(res.Events), res.Linearization)
	}
	// the unknown put took effect, at revision 5, between the compaction and the revoke
	if i := indexOf(res.Linearization, 7); i < 0 || indexOf(res.Linearization, 8) < i {
		t.Fatalf("unknown put placed at %d in %v", i, res.Linearization)
	}
	// the revoke at 6 shows that the unknown put made revision 5, so a watch that skips it broke
	// reliability
	h.Watches[0].Responses = append(h.Watches[0].Responses[:4], h.Watches[0].Responses[5:]...)
	wantOnly(t, h, Reliable, -1)
}

// readExample reads testdata/history.json.
func readExample(t *testing.T) *History {
	t.Helper()
	f, err := os.Open("testdata/history.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestJSONRoundTrip(t *testing.T) {
	h := scenario(t)
	h.Run = &check.Run{Schema: check.SchemaVersion, Tool: "listwatch (devel)", Target: "127.0.0.1:2379", Store: "etcd", Version: "3.4.23",
		Capabilities: []string{"key versions DIFFERS: version 0"}, Workload: "k8s", Seed: 3, Flags: []string{"--seed", "3"},
		Started: time.Unix(1000, 0).UTC(), Interrupted: true}
	var buf bytes.Buffer
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(h, back); d != "" {
		t.Fatalf("round trip differs:\n%s", d)
	}
}

func TestBytesJSON(t *testing.T) {
	for _, c := range []struct {
		b    Bytes
		json string
	}{
		{"abc", `"abc"`},
		{"\x00", `"\u0000"`},
		{"", `""`},
		{"a\xff", `{"base64":"Yf8="}`},
	} {
		got, err := c.b.MarshalJSON()
		if err != nil || string(got) != c.json {
			t.Errorf("%q marshals to %s, %v; want %s", c.b, got, err, c.json)
		}
		var back Bytes
		if err := back.UnmarshalJSON(got); err != nil || back != c.b {
			t.Errorf("%s unmarshals to %q, %v", got, back, err)
		}
	}
	var b Bytes
	for _, bad := range []string{`3`, `{"base64": "!!"}`, `{"hex": "00"}`} {
		if err := b.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestReadJSONErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"operations": [{"cal": 1}]}`, "unknown field"},
		{`{"operations": [{"request": {"range": {"key": "a", "sort_order": "SIDEWAYS"}}}]}`, "invalid sort order"},
		{`{"operations": [{"request": {"txn": {"compare": [{"result": "ABOUT", "key": "a"}]}}}]}`, "invalid compare result"},
		{`{"watches": [{"request": {"key": "a", "filters": ["NOTHING"]}}]}`, "invalid watch filter"},
		{`{"operations": [{"call": 1, "return": 2, "request": {"put": {"key": "a"}}}]}`, "neither a response nor an error"},
		{`{"watches": [{"responses": [{"events": [{"type": "TOUCH"}]}]}]}`, "invalid event type"},
		{`{"operations": [], "run": {"schema": 1}}`, "unsupported schema version 1 (this build reads version 2"},
		{`{"operations": [], "run": {}}`, "unsupported schema version 0"},
	} {
		_, err := ReadJSON(strings.NewReader(c.in))
		if !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrInvalidHistory mentioning %q", c.in, err, c.want)
		}
	}
}
