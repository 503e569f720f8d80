package watch_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/watch"
	"github.com/listwatch/listwatch/watch/watchtest"
)

func TestPredicate(t *testing.T) {
	p := watchtest.Pod("ns", "a", watchtest.Labels("app=web"), watchtest.Node("n1"))
	for _, tc := range []struct {
		name  string
		pred  watch.Predicate
		want  bool
		err   bool
		empty bool
	}{
		{"zero value", watch.Predicate{}, true, false, true},
		{"everything", watch.Everything, true, false, true},
		{"label match", watch.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}, true, false, false},
		{"label mismatch", watch.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "db"})}, false, false, false},
		{"default attrs: namespace", watch.Predicate{Field: fields.OneTermEqualSelector("metadata.namespace", "ns")}, true, false, false},
		{"default attrs: name", watch.Predicate{Field: fields.OneTermEqualSelector("metadata.name", "b")}, false, false, false},
		{"default attrs lack spec.nodeName", watch.Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", "n1")}, false, false, false},
		{"custom attrs", watchtest.PodPredicate("", "spec.nodeName=n1"), true, false, false},
		{"both must match", watchtest.PodPredicate("app=web", "spec.nodeName=n2"), false, false, false},
		{"attrs error", watch.Predicate{Label: labels.Everything(), Field: fields.OneTermEqualSelector("metadata.name", "a"),
			GetAttrs: func(runtime.Object) (labels.Set, fields.Set, error) { return nil, nil, errors.New("x") }}, false, true, false},
	} {
		got, err := tc.pred.Matches(p)
		if got != tc.want || (err != nil) != tc.err || tc.pred.Empty() != tc.empty || tc.pred.MatchesEverything() != tc.empty {
			t.Errorf("%s: Matches = %t, %v; Empty = %t", tc.name, got, err, tc.pred.Empty())
		}
	}
	if _, err := (&watch.Predicate{Field: fields.OneTermEqualSelector("metadata.name", "a")}).Matches(&metav1.Status{}); err == nil {
		t.Error("default attrs of an object without metadata accessor: no error")
	}
	single := watchtest.PodPredicate("", "metadata.name=a,metadata.namespace=ns")
	if n, ok := single.MatchesSingle(); !ok || n != "a" {
		t.Errorf("MatchesSingle = %q, %t", n, ok)
	}
	if n, ok := single.MatchesSingleNamespace(); !ok || n != "ns" {
		t.Errorf("MatchesSingleNamespace = %q, %t", n, ok)
	}
	single.Continue = "x"
	if _, ok := single.MatchesSingle(); ok {
		t.Error("MatchesSingle with a continue token")
	}
	ls, fs, err := watch.DefaultClusterScopedAttr(p)
	if err != nil || ls["app"] != "web" || len(fs) != 1 || fs["metadata.name"] != "a" {
		t.Errorf("cluster attrs %v %v %v", ls, fs, err)
	}
}

func TestPrepareKey(t *testing.T) {
	for _, tc := range []struct {
		key       string
		recursive bool
		want      string
		sentinel  error
		msg       string
	}{
		{"/pods/ns/a", false, "/pods/ns/a", nil, ""},
		{"/pods/ns", true, "/pods/ns/", nil, ""},
		{"/pods/ns/", true, "/pods/ns/", nil, ""},
		{"", false, "", watch.ErrEmptyKey, `empty key: ""`},
		{"/", true, "", watch.ErrEmptyKey, `empty key: "/"`},
		{".", false, "", watch.ErrInvalidKey, `invalid key: "."`},
		{"..", false, "", watch.ErrInvalidKey, `invalid key: ".."`},
		{"/pods/../secrets/x", false, "", watch.ErrInvalidKey, `invalid key: "/pods/../secrets/x"`},
		{"/pods/./x", false, "", watch.ErrInvalidKey, `invalid key: "/pods/./x"`},
		{"/pods/x/..", false, "", watch.ErrInvalidKey, `invalid key: "/pods/x/.."`},
		{"../pods", false, "", watch.ErrInvalidKey, `invalid key: "../pods"`},
		{"/secrets/x", false, "", watch.ErrInvalidKey, `invalid key: "/secrets/x" lacks resource prefix: "/pods/"`},
	} {
		got, err := watch.PrepareKey("/pods/", tc.key, tc.recursive)
		if tc.sentinel == nil {
			if err != nil || got != tc.want {
				t.Errorf("%q: %q, %v", tc.key, got, err)
			}
			continue
		}
		if !errors.Is(err, tc.sentinel) || err.Error() != tc.msg || got != "" {
			t.Errorf("%q: %q, %v; want %v %q", tc.key, got, err, tc.sentinel, tc.msg)
		}
	}
	if k, err := watch.NamespaceKeyFunc("/pods/", watchtest.Pod("ns", "a")); err != nil || k != "/pods/ns/a" {
		t.Errorf("NamespaceKeyFunc = %q, %v", k, err)
	}
	if k, err := watch.NoNamespaceKeyFunc("/nodes/", watchtest.Pod("", "n")); err != nil || k != "/nodes/n" {
		t.Errorf("NoNamespaceKeyFunc = %q, %v", k, err)
	}
	for _, bad := range []string{"..", ".", "a/b", "a%b"} {
		if _, err := watch.NamespaceKeyFunc("/pods/", watchtest.Pod("ns", bad)); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := watch.NamespaceKeyFunc("/pods", watchtest.Pod("ns", "a")); err == nil {
		t.Error("prefix without '/' accepted")
	}
}

func TestContinueTokens(t *testing.T) {
	tok, err := watch.EncodeContinue("/registry/pods/ns/b\x00", "/registry/pods/", 7)
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's format: base64url(JSON) without padding.
	if tok != "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nywic3RhcnQiOiJucy9iXHUwMDAwIn0" {
		t.Errorf("token %s", tok)
	}
	key, rv, err := watch.DecodeContinue(tok, "/registry/pods/")
	if err != nil || key != "/registry/pods/ns/b\x00" || rv != 7 {
		t.Errorf("decoded %q %d %v", key, rv, err)
	}
	if _, err := watch.EncodeContinue("/other/x", "/registry/pods/", 1); err == nil {
		t.Error("key outside the prefix encoded")
	}
	enc := func(s string) string { return b64(s) }
	for _, tc := range []struct {
		token string
		want  error
	}{
		{"%%", watch.ErrGenericInvalidKey},
		{enc("{"), watch.ErrGenericInvalidKey},
		{enc(`{"v":"meta.k8s.io/v2","rv":1,"start":"a"}`), watch.ErrUnrecognizedEncodedVersion},
		{enc(`{"v":"meta.k8s.io/v1","rv":0,"start":"a"}`), watch.ErrInvalidStartRV},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":""}`), watch.ErrEmptyStartKey},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"../secrets/x"}`), watch.ErrGenericInvalidKey},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"a/./b"}`), watch.ErrGenericInvalidKey},
	} {
		if _, _, err := watch.DecodeContinue(tc.token, "/registry/pods/"); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.token, err, tc.want)
		}
	}
	if key, rv, err := watch.DecodeContinue(enc(`{"v":"meta.k8s.io/v1","rv":-1,"start":"a"}`), "/registry/pods/"); err != nil || rv != -1 || key != "/registry/pods/a" {
		t.Errorf("rv -1: %q %d %v", key, rv, err)
	}
}

func TestVersioner(t *testing.T) {
	v := watch.APIObjectVersioner{}
	for _, tc := range []struct {
		in   string
		want uint64
		msg  string
	}{
		{"", 0, ""}, {"0", 0, ""}, {"17", 17, ""}, {"18446744073709551615", 18446744073709551615, ""},
		{"abc", 0, `resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`},
		{"-1", 0, `resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax`},
		{"18446744073709551616", 0, `resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: parsing "18446744073709551616": value out of range`},
	} {
		got, err := v.ParseResourceVersion(tc.in)
		if tc.msg == "" {
			if err != nil || got != tc.want {
				t.Errorf("%q: %d, %v", tc.in, got, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.msg || !watch.IsInvalidError(err) {
			t.Errorf("%q: got %v, want %s", tc.in, err, tc.msg)
		}
		if api := watch.InterpretWatchError(err, schema.GroupResource{Resource: "pods"}, "x"); !apierrors.IsInvalid(api) {
			t.Errorf("%q: InterpretWatchError = %v, want 422 Invalid", tc.in, api)
		}
	}
	u := watchtest.Pod("ns", "a")
	if err := v.UpdateObject(u, 12); err != nil || u.GetResourceVersion() != "12" {
		t.Errorf("UpdateObject: %q %v", u.GetResourceVersion(), err)
	}
	if rv, err := v.ObjectResourceVersion(u); err != nil || rv != 12 {
		t.Errorf("ObjectResourceVersion: %d %v", rv, err)
	}
	u.SetSelfLink("x")
	if err := v.PrepareObjectForStorage(u); err != nil || u.GetResourceVersion() != "" || u.GetSelfLink() != "" {
		t.Errorf("PrepareObjectForStorage left %v", u.Object)
	}
	if err := v.UpdateObject(u, 0); err != nil || u.GetResourceVersion() != "" {
		t.Errorf("UpdateObject(0): %q", u.GetResourceVersion())
	}
	l := &unstructured.UnstructuredList{}
	n := int64(3)
	if err := v.UpdateList(l, 9, "tok", &n); err != nil || l.GetResourceVersion() != "9" || l.GetContinue() != "tok" || *l.GetRemainingItemCount() != 3 {
		t.Errorf("UpdateList: %v %v", l.Object, err)
	}
	if err := v.UpdateList(l, 0, "", nil); err == nil || err.Error() != "illegal resource version from storage: 0" {
		t.Errorf("UpdateList(0): %v", err)
	}
	if _, err := v.ObjectResourceVersion(&runtime.Unknown{}); err == nil {
		t.Error("ObjectResourceVersion of an object without metadata: no error")
	}
}

func TestStorageErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err      error
		sentinel error
		check    func(error) bool
		api      func(error) error
		apiCheck func(error) bool
	}{
		{watch.NewKeyNotFoundError("/k", 0), watch.ErrKeyNotFound, watch.IsNotFound,
			func(e error) error { return watch.InterpretGetError(e, gr, "a") }, apierrors.IsNotFound},
		{watch.NewKeyExistsError("/k", 0), watch.ErrKeyExists, watch.IsExist,
			func(e error) error { return watch.InterpretCreateError(e, gr, "a") }, apierrors.IsAlreadyExists},
		{watch.NewResourceVersionConflictsError("/k", 3), watch.ErrResourceVersionConflicts, watch.IsConflict,
			func(e error) error { return watch.InterpretUpdateError(e, gr, "a") }, apierrors.IsConflict},
		{watch.NewInvalidObjError("/k", "precondition"), watch.ErrInvalidObj, watch.IsInvalidObj,
			func(e error) error { return watch.InterpretDeleteError(e, gr, "a") }, apierrors.IsConflict},
		{watch.NewTimeoutError("/k", "slow"), watch.ErrTimeout, watch.IsRequestTimeout,
			func(e error) error { return watch.InterpretListError(e, gr) }, apierrors.IsServerTimeout},
		{watch.NewCorruptObjError("/k", errors.New("bad")), watch.ErrCorruptObj, watch.IsCorruptObject,
			func(e error) error { return watch.InterpretGetError(e, gr, "a") }, apierrors.IsInternalError},
		{watch.NewInternalError(errors.New("oops")), nil, watch.IsInternalError,
			func(e error) error { return watch.InterpretCreateError(e, gr, "a") }, apierrors.IsInternalError},
	} {
		if tc.sentinel != nil && !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%v does not match %v", tc.err, tc.sentinel)
		}
		if !tc.check(tc.err) {
			t.Errorf("%v: predicate false", tc.err)
		}
		if !tc.check(errorsJoin(tc.err)) {
			t.Errorf("%v: predicate false when wrapped", tc.err)
		}
		if api := tc.api(tc.err); !tc.apiCheck(api) {
			t.Errorf("%v: API error %v", tc.err, api)
		}
	}
	if errors.Is(watch.NewKeyNotFoundError("/k", 0), watch.ErrKeyExists) {
		t.Error("KeyNotFound matches ErrKeyExists")
	}
	too := watch.NewTooLargeResourceVersionError(10, 5, 2)
	if !watch.IsTooLargeResourceVersion(too) || too.Error() != "Timeout: Too large resource version: 10, current: 5" {
		t.Errorf("too large: %v", too)
	}
	if watch.IsTooLargeResourceVersion(apierrors.NewTimeoutError("x", 1)) {
		t.Error("a plain timeout is TooLargeResourceVersion")
	}
	if got := watch.NewKeyExistsError("/k", 0).Error(); got != "StorageError: key exists, Code: 2, Key: /k, ResourceVersion: 0, AdditionalErrorMsg: <nil>" {
		t.Errorf("message %q", got)
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

func TestPreconditions(t *testing.T) {
	u := watchtest.Pod("ns", "a")
	u.SetUID("u1")
	u.SetResourceVersion("5")
	uid, other := types.UID("u1"), types.UID("u2")
	rv, stale := "5", "4"
	var nilP *watch.Preconditions
	for _, tc := range []struct {
		p    *watch.Preconditions
		want string
	}{
		{nilP, ""},
		{&watch.Preconditions{}, ""},
		{&watch.Preconditions{UID: &uid, ResourceVersion: &rv}, ""},
		{&watch.Preconditions{UID: &other}, "Precondition failed: UID in precondition: u2, UID in object meta: u1"},
		{&watch.Preconditions{ResourceVersion: &stale}, "Precondition failed: ResourceVersion in precondition: 4, ResourceVersion in object meta: 5"},
	} {
		err := tc.p.Check("/k", u)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.p, err)
			}
			continue
		}
		if !watch.IsInvalidObj(err) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc.p, err)
		}
	}
	if err := (&watch.Preconditions{UID: &uid}).Check("/k", &runtime.Unknown{}); !watch.IsInternalError(err) {
		t.Errorf("un-introspectable object: %v", err)
	}
}

func TestCodecs(t *testing.T) {
	u := watchtest.Pod("ns", "a", watchtest.Labels("x=y"))
	data, err := watch.UnstructuredJSON.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := watch.UnstructuredJSON.Decode(data, nil)
	if err != nil || obj.(*unstructured.Unstructured).GetLabels()["x"] != "y" {
		t.Fatalf("decode: %v %v", obj, err)
	}
	into := &unstructured.Unstructured{Object: map[string]interface{}{"junk": true}}
	if _, err := watch.UnstructuredJSON.Decode(data, into); err != nil || into.Object["junk"] != nil || into.GetName() != "a" {
		t.Fatalf("decode into: %v %v", into.Object, err)
	}
	for _, bad := range []string{"not json", "{}", `{"apiVersion":"v1"}`} {
		if _, err := watch.UnstructuredJSON.Decode([]byte(bad), nil); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	list, err := watch.UnstructuredJSON.Decode([]byte(`{"apiVersion":"v1","kind":"PodList","items":[]}`), nil)
	if _, ok := list.(*unstructured.UnstructuredList); err != nil || !ok {
		t.Errorf("list: %T %v", list, err)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
