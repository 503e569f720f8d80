package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/httpwatch/watchclient"
)

// FuzzListQuery feeds arbitrary list and watch queries (and a /watch/ path name) to
// httpwatch.ParseListOptions and checks what the apiserver's parsing promises: a refusal is a 400
// BadRequest or a 422 Invalid on ListOptions; an accepted query satisfies the metainternalversion
// validation rules, was defaulted to a watch-list when WatchList asks for it, selects only known field
// labels, pins the path name, and parses to the same options when encoded back to a query.
func FuzzListQuery(f *testing.F) {
	for _, seed := range []struct {
		query, name string
		gateOff     bool
	}{
		{"", "", false},
		{"watch=true", "", false},
		{"watch=true&resourceVersion=0&allowWatchBookmarks=true", "", false},
		{"watch=1&resourceVersion=12&timeoutSeconds=30", "", false},
		{"watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "", false},
		{"watch=true&sendInitialEvents=true", "", true},
		{"sendInitialEvents=false", "", false},
		{"resourceVersion=5&resourceVersionMatch=Exact&limit=10", "", false},
		{"resourceVersion=0&resourceVersionMatch=Exact", "", false},
		{"continue=abc&resourceVersionMatch=NotOlderThan&resourceVersion=1", "", false},
		{"labelSelector=app%3Dweb%2Cenv+in+%28a%2Cb%29%2C%21x&fieldSelector=metadata.namespace%21%3Dkube-system", "", false},
		{"labelSelector=a+in+%28b", "", false},
		{"fieldSelector=metadata.name%3Dfoo", "foo", false},
		{"fieldSelector=metadata.name%3Dbar", "foo", false},
		{"fieldSelector=spec.nodeName%3Dn1", "", false},
		{"limit=-1&timeoutSeconds=x", "", false},
		{"watch=true&resourceVersion=abc&resourceVersionMatch=Newest", "", false},
	} {
		f.Add(seed.query, seed.name, seed.gateOff)
	}
	res := httpwatch.ConfigMaps()
	f.Fuzz(func(t *testing.T, rawQuery, name string, gateOff bool) {
		query, _ := url.ParseQuery(rawQuery) // keeps what parsed, as net/http does
		features := httpwatch.Features{DisableWatchList: gateOff}
		opts, err := httpwatch.ParseListOptions(res, query, name, features)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkListOptions(t, query, name, gateOff, &opts)

		// Encoded back to a query (as client-go encodes ListOptions), the options parse the same. A
		// path name is put in the selector unparsed, so one that is not UTF-8 comes back normalized.
		if !utf8.ValidString(name) {
			return
		}
		var versioned metav1.ListOptions
		if err := metainternalversionscheme.Scheme.Convert(&opts, &versioned, nil); err != nil {
			t.Fatalf("converting %+v: %v", opts, err)
		}
		again, err := metainternalversionscheme.ParameterCodec.EncodeParameters(&versioned, metav1.SchemeGroupVersion)
		if err != nil {
			t.Fatalf("encoding %+v: %v", versioned, err)
		}
		reparsed, err := httpwatch.ParseListOptions(res, again, "", features)
		if err != nil {
			t.Fatalf("query %q parsed, its re-encoding %q did not: %v", rawQuery, again.Encode(), err)
		}
		if !sameListOptions(&opts, &reparsed) {
			t.Fatalf("query %q: %+v, re-encoded %q: %+v", rawQuery, opts, again.Encode(), reparsed)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("refusal %T %v is not an API error", err, err)
	}
	s := se.Status()
	switch s.Code {
	case http.StatusBadRequest:
		if s.Reason != metav1.StatusReasonBadRequest {
			t.Fatalf("400 with reason %q", s.Reason)
		}
	case http.StatusUnprocessableEntity:
		if s.Reason != metav1.StatusReasonInvalid || s.Details == nil || s.Details.Kind != "ListOptions" || s.Details.Group != "meta.k8s.io" {
			t.Fatalf("422 %+v", s)
		}
	default:
		t.Fatalf("refused with %d %q", s.Code, s.Message)
	}
	if s.Message == "" {
		t.Fatalf("refusal without a message")
	}
}

func checkListOptions(t *testing.T, query url.Values, name string, gateOff bool, o *metainternalversion.ListOptions) {
	t.Helper()
	rvm := o.ResourceVersionMatch
	if o.Watch {
		if o.SendInitialEvents != nil && rvm != metav1.ResourceVersionMatchNotOlderThan {
			t.Fatalf("watch with sendInitialEvents and resourceVersionMatch %q", rvm)
		}
		if rvm != "" && (o.SendInitialEvents == nil || o.Continue != "") {
			t.Fatalf("watch with resourceVersionMatch %q, sendInitialEvents %v, continue %q", rvm, o.SendInitialEvents, o.Continue)
		}
		if gateOff && o.SendInitialEvents != nil {
			t.Fatalf("sendInitialEvents accepted with WatchList off")
		}
		_, hasSIE := query["sendInitialEvents"]
		_, hasRVM := query["resourceVersionMatch"]
		legacy := o.ResourceVersion == "" || o.ResourceVersion == "0"
		if !gateOff && legacy && !hasSIE && !hasRVM && (o.SendInitialEvents == nil || !*o.SendInitialEvents) {
			t.Fatalf("watch from %q was not defaulted to a watch-list", o.ResourceVersion)
		}
	} else {
		if o.SendInitialEvents != nil {
			t.Fatalf("list with sendInitialEvents")
		}
		if rvm != "" && (o.ResourceVersion == "" || o.Continue != "") {
			t.Fatalf("list with resourceVersionMatch %q, resourceVersion %q, continue %q", rvm, o.ResourceVersion, o.Continue)
		}
		switch rvm {
		case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
		default:
			t.Fatalf("list with resourceVersionMatch %q", rvm)
		}
	}
	if o.FieldSelector != nil {
		for _, r := range o.FieldSelector.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				t.Fatalf("field selector on unknown label %q accepted", r.Field)
			}
		}
	}
	if name != "" {
		if o.FieldSelector == nil {
			t.Fatalf("name %q without a field selector", name)
		}
		if got, ok := o.FieldSelector.RequiresExactMatch("metadata.name"); !ok || got != name {
			t.Fatalf("name %q, selector %q", name, o.FieldSelector)
		}
	}
}

func sameListOptions(a, b *metainternalversion.ListOptions) bool {
	labelsOf := func(o *metainternalversion.ListOptions) string {
		if o.LabelSelector == nil {
			return ""
		}
		return o.LabelSelector.String()
	}
	fieldsOf := func(o *metainternalversion.ListOptions) string {
		if o.FieldSelector == nil {
			return ""
		}
		return o.FieldSelector.String()
	}
	if labelsOf(a) != labelsOf(b) || fieldsOf(a) != fieldsOf(b) {
		return false
	}
	ac, bc := *a, *b
	ac.LabelSelector, ac.FieldSelector, bc.LabelSelector, bc.FieldSelector = nil, nil, nil, nil
	return reflect.DeepEqual(ac, bc)
}

// FuzzWatchDecoder feeds arbitrary bytes to watchclient.Decoder as a watch stream and checks it: it
// never panics, ends with io.EOF, io.ErrUnexpectedEOF or an ErrInvalidFrame error that repeats,
// returns only frames of a known type whose object is a JSON object, and the frames it returns,
// written again with AppendFrame, decode to the same frames.
func FuzzWatchDecoder(f *testing.F) {
	for _, seed := range []string{
		"",
		`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"2"}}}` + "\n",
		`{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}` + "\n" + `{"type":"DELETED","object":{}}` + "\n",
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410}}` + "\n",
		`{"type":"ADDED","object":{"a":1}}{"type":"ADDED","object":{"b":2}}`,
		`{"type":"UNKNOWN","object":{}}`,
		`{"type":"ADDED","object":[]}`,
		`{"type":"ADDED"}`,
		`{"object":{}}`,
		`{"type":"ADDED","object":{"a":`,
		`[1,2]`,
		" \n\t" + `{"type":"ADDED","object":{"html":"\u003ca\u003e","sep":"\u2028"}}` + " x",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := decodeAll(data)
		switch {
		case err == io.EOF, err == io.ErrUnexpectedEOF, errors.Is(err, watchclient.ErrInvalidFrame):
		default:
			t.Fatalf("decoder ended with %T %v", err, err)
		}
		var again []byte
		for _, fr := range frames {
			switch fr.Type {
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
			default:
				t.Fatalf("frame of type %q", fr.Type)
			}
			if !json.Valid(fr.Object) || !bytes.HasPrefix(fr.Object, []byte("{")) {
				t.Fatalf("frame object %q is not a JSON object", fr.Object)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, fr.Object); err != nil {
				t.Fatal(err)
			}
			again = watchclient.AppendFrame(again, fr.Type, compact.Bytes())
		}
		reframes, err := decodeAll(again)
		if err != io.EOF || len(reframes) != len(frames) {
			t.Fatalf("re-encoded %d frames decode to %d (%v): %q", len(frames), len(reframes), err, again)
		}
		for i := range frames {
			if frames[i].Type != reframes[i].Type || !jsonEqual(frames[i].Object, reframes[i].Object) {
				t.Fatalf("frame %d: %s %s became %s %s", i, frames[i].Type, frames[i].Object, reframes[i].Type, reframes[i].Object)
			}
		}
		if !strings.HasSuffix(string(again), "\n") && len(again) > 0 {
			t.Fatalf("AppendFrame does not end frames with a newline")
		}
	})
}

// decodeAll returns the frames of data and the error that ended them; a later Decode must repeat it.
func decodeAll(data []byte) ([]watchclient.Frame, error) {
	dec := watchclient.NewDecoder(bytes.NewReader(data))
	var frames []watchclient.Frame
	for {
		fr, err := dec.Decode()
		if err != nil {
			if _, err2 := dec.Decode(); err2 != err {
				return frames, errors.New("the decoder's error changed")
			}
			return frames, err
		}
		frames = append(frames, fr)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
