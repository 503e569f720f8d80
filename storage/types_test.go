package storage_test

import (
	"context"
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

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

func TestPredicate(t *testing.T) {
	p := storagetest.Pod("ns", "a", storagetest.Labels("app=web"), storagetest.Node("n1"))
	for _, tc := range []struct {
		name  string
		pred  storage.Predicate
		want  bool
		err   bool
		empty bool
	}{
		{"zero value", storage.Predicate{}, true, false, true},
		{"everything", storage.Everything, true, false, true},
		{"label match", storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}, true, false, false},
		{"label mismatch", storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "db"})}, false, false, false},
		{"default attrs: namespace", storage.Predicate{Field: fields.OneTermEqualSelector("metadata.namespace", "ns")}, true, false, false},
		{"default attrs: name", storage.Predicate{Field: fields.OneTermEqualSelector("metadata.name", "b")}, false, false, false},
		{"default attrs lack spec.nodeName", storage.Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", "n1")}, false, false, false},
		{"custom attrs", storagetest.PodPredicate("", "spec.nodeName=n1"), true, false, false},
		{"both must match", storagetest.PodPredicate("app=web", "spec.nodeName=n2"), false, false, false},
		{"attrs error", storage.Predicate{Label: labels.Everything(), Field: fields.OneTermEqualSelector("metadata.name", "a"),
			GetAttrs: func(runtime.Object) (labels.Set, fields.Set, error) { return nil, nil, errors.New("x") }}, false, true, false},
	} {
		got, err := tc.pred.Matches(p)
		if got != tc.want || (err != nil) != tc.err || tc.pred.Empty() != tc.empty || tc.pred.MatchesEverything() != tc.empty {
			t.Errorf("%s: Matches = %t, %v; Empty = %t", tc.name, got, err, tc.pred.Empty())
		}
	}
	if _, err := (&storage.Predicate{Field: fields.OneTermEqualSelector("metadata.name", "a")}).Matches(&metav1.Status{}); err == nil {
		t.Error("default attrs of an object without metadata accessor: no error")
	}
	single := storagetest.PodPredicate("", "metadata.name=a,metadata.namespace=ns")
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
	ls, fs, err := storage.DefaultClusterScopedAttr(p)
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
		{"", false, "", storage.ErrEmptyKey, `empty key: ""`},
		{"/", true, "", storage.ErrEmptyKey, `empty key: "/"`},
		{".", false, "", storage.ErrInvalidKey, `invalid key: "."`},
		{"..", false, "", storage.ErrInvalidKey, `invalid key: ".."`},
		{"/pods/../secrets/x", false, "", storage.ErrInvalidKey, `invalid key: "/pods/../secrets/x"`},
		{"/pods/./x", false, "", storage.ErrInvalidKey, `invalid key: "/pods/./x"`},
		{"/pods/x/..", false, "", storage.ErrInvalidKey, `invalid key: "/pods/x/.."`},
		{"../pods", false, "", storage.ErrInvalidKey, `invalid key: "../pods"`},
		{"/secrets/x", false, "", storage.ErrInvalidKey, `invalid key: "/secrets/x" lacks resource prefix: "/pods/"`},
	} {
		got, err := storage.PrepareKey("/pods/", tc.key, tc.recursive)
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
	if k, err := storage.NamespaceKeyFunc("/pods/", storagetest.Pod("ns", "a")); err != nil || k != "/pods/ns/a" {
		t.Errorf("NamespaceKeyFunc = %q, %v", k, err)
	}
	if k, err := storage.NoNamespaceKeyFunc("/nodes/", storagetest.Pod("", "n")); err != nil || k != "/nodes/n" {
		t.Errorf("NoNamespaceKeyFunc = %q, %v", k, err)
	}
	for _, bad := range []string{"..", ".", "a/b", "a%b"} {
		if _, err := storage.NamespaceKeyFunc("/pods/", storagetest.Pod("ns", bad)); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := storage.NamespaceKeyFunc("/pods", storagetest.Pod("ns", "a")); err == nil {
		t.Error("prefix without '/' accepted")
	}
}

func TestContinueTokens(t *testing.T) {
	tok, err := storage.EncodeContinue("/registry/pods/ns/b\x00", "/registry/pods/", 7)
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's format: base64url(JSON) without padding.
	if tok != "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nywic3RhcnQiOiJucy9iXHUwMDAwIn0" {
		t.Errorf("token %s", tok)
	}
	key, rv, err := storage.DecodeContinue(tok, "/registry/pods/")
	if err != nil || key != "/registry/pods/ns/b\x00" || rv != 7 {
		t.Errorf("decoded %q %d %v", key, rv, err)
	}
	if _, err := storage.EncodeContinue("/other/x", "/registry/pods/", 1); err == nil {
		t.Error("key outside the prefix encoded")
	}
	enc := func(s string) string { return b64(s) }
	for _, tc := range []struct {
		token string
		want  error
	}{
		{"%%", storage.ErrGenericInvalidKey},
		{enc("{"), storage.ErrGenericInvalidKey},
		{enc(`{"v":"meta.k8s.io/v2","rv":1,"start":"a"}`), storage.ErrUnrecognizedEncodedVersion},
		{enc(`{"v":"meta.k8s.io/v1","rv":0,"start":"a"}`), storage.ErrInvalidStartRV},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":""}`), storage.ErrEmptyStartKey},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"../secrets/x"}`), storage.ErrGenericInvalidKey},
		{enc(`{"v":"meta.k8s.io/v1","rv":1,"start":"a/./b"}`), storage.ErrGenericInvalidKey},
	} {
		if _, _, err := storage.DecodeContinue(tc.token, "/registry/pods/"); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.token, err, tc.want)
		}
	}
	if key, rv, err := storage.DecodeContinue(enc(`{"v":"meta.k8s.io/v1","rv":-1,"start":"a"}`), "/registry/pods/"); err != nil || rv != -1 || key != "/registry/pods/a" {
		t.Errorf("rv -1: %q %d %v", key, rv, err)
	}
}

func TestVersioner(t *testing.T) {
	v := storage.APIObjectVersioner{}
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
		if err == nil || err.Error() != tc.msg || !storage.IsInvalidError(err) {
			t.Errorf("%q: got %v, want %s", tc.in, err, tc.msg)
		}
		if api := storage.InterpretWatchError(err, schema.GroupResource{Resource: "pods"}, "x"); !apierrors.IsInvalid(api) {
			t.Errorf("%q: InterpretWatchError = %v, want 422 Invalid", tc.in, api)
		}
	}
	u := storagetest.Pod("ns", "a")
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
		{storage.NewKeyNotFoundError("/k", 0), storage.ErrKeyNotFound, storage.IsNotFound,
			func(e error) error { return storage.InterpretGetError(e, gr, "a") }, apierrors.IsNotFound},
		{storage.NewKeyExistsError("/k", 0), storage.ErrKeyExists, storage.IsExist,
			func(e error) error { return storage.InterpretCreateError(e, gr, "a") }, apierrors.IsAlreadyExists},
		{storage.NewResourceVersionConflictsError("/k", 3), storage.ErrResourceVersionConflicts, storage.IsConflict,
			func(e error) error { return storage.InterpretUpdateError(e, gr, "a") }, apierrors.IsConflict},
		{storage.NewInvalidObjError("/k", "precondition"), storage.ErrInvalidObj, storage.IsInvalidObj,
			func(e error) error { return storage.InterpretDeleteError(e, gr, "a") }, apierrors.IsConflict},
		{storage.NewTimeoutError("/k", "slow"), storage.ErrTimeout, storage.IsRequestTimeout,
			func(e error) error { return storage.InterpretListError(e, gr) }, apierrors.IsServerTimeout},
		{storage.NewCorruptObjError("/k", errors.New("bad")), storage.ErrCorruptObj, storage.IsCorruptObject,
			func(e error) error { return storage.InterpretGetError(e, gr, "a") }, apierrors.IsInternalError},
		{storage.NewInternalError(errors.New("oops")), nil, storage.IsInternalError,
			func(e error) error { return storage.InterpretCreateError(e, gr, "a") }, apierrors.IsInternalError},
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
	if errors.Is(storage.NewKeyNotFoundError("/k", 0), storage.ErrKeyExists) {
		t.Error("KeyNotFound matches ErrKeyExists")
	}
	too := storage.NewTooLargeResourceVersionError(10, 5, 2)
	if !storage.IsTooLargeResourceVersion(too) || too.Error() != "Timeout: Too large resource version: 10, current: 5" {
		t.Errorf("too large: %v", too)
	}
	if storage.IsTooLargeResourceVersion(apierrors.NewTimeoutError("x", 1)) {
		t.Error("a plain timeout is TooLargeResourceVersion")
	}
	if got := storage.NewKeyExistsError("/k", 0).Error(); got != "StorageError: key exists, Code: 2, Key: /k, ResourceVersion: 0, AdditionalErrorMsg: <nil>" {
		t.Errorf("message %q", got)
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

func TestPreconditions(t *testing.T) {
	u := storagetest.Pod("ns", "a")
	u.SetUID("u1")
	u.SetResourceVersion("5")
	uid, other := types.UID("u1"), types.UID("u2")
	rv, stale := "5", "4"
	var nilP *storage.Preconditions
	for _, tc := range []struct {
		p    *storage.Preconditions
		want string
	}{
		{nilP, ""},
		{&storage.Preconditions{}, ""},
		{&storage.Preconditions{UID: &uid, ResourceVersion: &rv}, ""},
		{&storage.Preconditions{UID: &other}, "Precondition failed: UID in precondition: u2, UID in object meta: u1"},
		{&storage.Preconditions{ResourceVersion: &stale}, "Precondition failed: ResourceVersion in precondition: 4, ResourceVersion in object meta: 5"},
	} {
		err := tc.p.Check("/k", u)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.p, err)
			}
			continue
		}
		if !storage.IsInvalidObj(err) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc.p, err)
		}
	}
	if err := (&storage.Preconditions{UID: &uid}).Check("/k", &runtime.Unknown{}); !storage.IsInternalError(err) {
		t.Errorf("un-introspectable object: %v", err)
	}
}

func TestCodecs(t *testing.T) {
	u := storagetest.Pod("ns", "a", storagetest.Labels("x=y"))
	data, err := storage.UnstructuredJSON.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := storage.UnstructuredJSON.Decode(data, nil)
	if err != nil || obj.(*unstructured.Unstructured).GetLabels()["x"] != "y" {
		t.Fatalf("decode: %v %v", obj, err)
	}
	into := &unstructured.Unstructured{Object: map[string]interface{}{"junk": true}}
	if _, err := storage.UnstructuredJSON.Decode(data, into); err != nil || into.Object["junk"] != nil || into.GetName() != "a" {
		t.Fatalf("decode into: %v %v", into.Object, err)
	}
	for _, bad := range []string{"not json", "{}", `{"apiVersion":"v1"}`} {
		if _, err := storage.UnstructuredJSON.Decode([]byte(bad), nil); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	list, err := storage.UnstructuredJSON.Decode([]byte(`{"apiVersion":"v1","kind":"PodList","items":[]}`), nil)
	if _, ok := list.(*unstructured.UnstructuredList); err != nil || !ok {
		t.Errorf("list: %T %v", list, err)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestRequestScope: the scope set on a context is read back from it and from its children; a
// context without one has the zero scope (cluster-wide, no name).
func TestRequestScope(t *testing.T) {
	if got := storage.RequestScopeFrom(context.Background()); got != (storage.RequestScope{}) {
		t.Fatalf("empty context: %+v", got)
	}
	want := storage.RequestScope{Namespace: "a", Name: "x"}
	ctx, cancel := context.WithCancel(storage.WithRequestScope(context.Background(), want))
	defer cancel()
	if got := storage.RequestScopeFrom(ctx); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestWatchInitializedSignal: the signal set on a context is called by WatchInitialized on it or a
// child, once however often it is called; a context without one is a no-op.
func TestWatchInitializedSignal(t *testing.T) {
	storage.WatchInitialized(context.Background())
	calls := 0
	ctx, cancel := context.WithCancel(storage.WithWatchInitializedSignal(context.Background(), func() { calls++ }))
	defer cancel()
	if calls != 0 {
		t.Fatalf("signalled on creation: %d", calls)
	}
	storage.WatchInitialized(ctx)
	storage.WatchInitialized(ctx)
	if calls != 1 {
		t.Errorf("signalled %d times, want 1", calls)
	}
}
