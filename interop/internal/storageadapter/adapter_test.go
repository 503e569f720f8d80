package storageadapter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStorage records the arguments it is called with and answers with err.
type fakeStorage struct {
	err      error
	list     storage.ListOptions
	get      storage.GetOptions
	del      storage.DeleteOptions
	pre      *storage.Preconditions
	validate storage.ValidateObjectFunc
	update   storage.UpdateFunc
	watcher  watch.Interface
	scope    storage.RequestScope
	ready    bool
	stats    storage.Stats
	// watchCtx is the context Watch was called with.
	watchCtx context.Context
}

func (f *fakeStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }
func (f *fakeStorage) Create(context.Context, string, runtime.Object, runtime.Object, uint64) error {
	return f.err
}
func (f *fakeStorage) Delete(_ context.Context, _ string, _ runtime.Object, p *storage.Preconditions, v storage.ValidateObjectFunc, _ runtime.Object, o storage.DeleteOptions) error {
	f.pre, f.validate, f.del = p, v, o
	return f.err
}
func (f *fakeStorage) Watch(ctx context.Context, _ string, o storage.ListOptions) (watch.Interface, error) {
	f.list, f.scope, f.watchCtx = o, storage.RequestScopeFrom(ctx), ctx
	return f.watcher, f.err
}
func (f *fakeStorage) Get(_ context.Context, _ string, o storage.GetOptions, _ runtime.Object) error {
	f.get = o
	return f.err
}
func (f *fakeStorage) GetList(_ context.Context, _ string, o storage.ListOptions, _ runtime.Object) error {
	f.list = o
	return f.err
}
func (f *fakeStorage) GuaranteedUpdate(_ context.Context, _ string, _ runtime.Object, _ bool, p *storage.Preconditions, u storage.UpdateFunc, _ runtime.Object) error {
	f.pre, f.update = p, u
	return f.err
}
func (f *fakeStorage) GetCurrentResourceVersion(context.Context) (uint64, error) { return 7, f.err }
func (f *fakeStorage) RequestWatchProgress(context.Context) error                { return f.err }
func (f *fakeStorage) Ready() bool                                               { return f.ready }
func (f *fakeStorage) Stats(context.Context) (storage.Stats, error)              { return f.stats, f.err }

// estimating is a storage with a size estimate, as *watch.Store.
type estimating struct {
	fakeStorage
	keys storage.KeysFunc
}

func (e *estimating) EnableResourceSizeEstimation(keys storage.KeysFunc) error {
	if keys == nil {
		return errors.New("KeysFunc cannot be nil")
	}
	e.keys = keys
	return nil
}

// TestListOptionsCarryEveryField sets every field of upstream's ListOptions and SelectionPredicate
// and requires each to arrive, or to be one of the fields the adapter documents as dropped. A field
// upstream adds later fails the test until it is handled.
func TestListOptionsCarryEveryField(t *testing.T) {
	dropped := map[string]bool{"RecordTimestamps": true, "IndexLabels": true, "IndexFields": true, "ShardSelector": true}
	handled := map[string]bool{"ResourceVersion": true, "ResourceVersionMatch": true, "Predicate": true, "Recursive": true,
		"ProgressNotify": true, "SendInitialEvents": true, "Label": true, "Field": true, "GetAttrs": true, "Limit": true,
		"Continue": true, "AllowWatchBookmarks": true}
	for _, typ := range []reflect.Type{reflect.TypeOf(k8sstorage.ListOptions{}), reflect.TypeOf(k8sstorage.SelectionPredicate{})} {
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; !dropped[name] && !handled[name] {
				t.Errorf("%s.%s is neither carried nor documented as dropped", typ.Name(), name)
			}
		}
	}

	yes := true
	attrsCalled := false
	in := k8sstorage.ListOptions{
		ResourceVersion:      "12",
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		Predicate: k8sstorage.SelectionPredicate{
			Label: labels.SelectorFromSet(labels.Set{"a": "b"}),
			Field: fields.OneTermEqualSelector("metadata.name", "x"),
			GetAttrs: func(runtime.Object) (labels.Set, fields.Set, error) {
				attrsCalled = true
				return nil, nil, nil
			},
			Limit:               5,
			Continue:            "token",
			AllowWatchBookmarks: true,
			IndexFields:         []string{"spec.nodeName"},
		},
		Recursive:         true,
		ProgressNotify:    true,
		SendInitialEvents: &yes,
		RecordTimestamps:  true,
	}
	f := &fakeStorage{}
	a := New(f, Options{})
	if err := a.GetList(context.Background(), "/pods/", in, &example.PodList{}); err != nil {
		t.Fatal(err)
	}
	got := f.list
	if got.ResourceVersion != "12" || got.ResourceVersionMatch != metav1.ResourceVersionMatchExact || !got.Recursive ||
		!got.ProgressNotify || got.SendInitialEvents != &yes {
		t.Errorf("options not carried: %+v", got)
	}
	p := got.Predicate
	if p.Label.String() != "a=b" || p.Field.String() != "metadata.name=x" || p.Limit != 5 || p.Continue != "token" || !p.AllowWatchBookmarks {
		t.Errorf("predicate not carried: %+v", p)
	}
	if p.GetAttrs == nil {
		t.Fatal("GetAttrs dropped")
	}
	_, _, _ = p.GetAttrs(&example.Pod{})
	if !attrsCalled {
		t.Error("GetAttrs is not the caller's")
	}
	if _, err := a.Watch(context.Background(), "/pods/", in); err != nil || f.list.Predicate.Continue != "token" {
		t.Errorf("Watch: %v, options %+v", err, f.list)
	}
	if err := a.Get(context.Background(), "/pods/a/b", k8sstorage.GetOptions{IgnoreNotFound: true, ResourceVersion: "3"}, &example.Pod{}); err != nil ||
		f.get != (storage.GetOptions{IgnoreNotFound: true, ResourceVersion: "3"}) {
		t.Errorf("Get: %v, options %+v", err, f.get)
	}
}

// TestShardSelectorRefused: an option listwatch cannot honour fails the call instead of being
// dropped, which would widen the selection.
func TestShardSelectorRefused(t *testing.T) {
	sel := sharding.NewSelector(sharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: "0x0000000000000000", End: "0x8000000000000000"})
	f := &fakeStorage{}
	a := New(f, Options{})
	opts := k8sstorage.ListOptions{Predicate: k8sstorage.SelectionPredicate{Label: labels.Everything(), Field: fields.Everything(), ShardSelector: sel}}
	if err := a.GetList(context.Background(), "/pods/", opts, &example.PodList{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("GetList with a shard selector: %v, want ErrNotSupported", err)
	}
	if _, err := a.Watch(context.Background(), "/pods/", opts); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Watch with a shard selector: %v, want ErrNotSupported", err)
	}
	opts.Predicate.ShardSelector = sharding.Everything()
	if err := a.GetList(context.Background(), "/pods/", opts, &example.PodList{}); err != nil {
		t.Errorf("GetList with the shard selector that selects everything: %v", err)
	}
}

// TestErrorConversion converts every storage error both ways and requires upstream's Is* functions
// to recognise the result, the message to be the one upstream's constructor gives, and other
// errors to pass unchanged.
func TestErrorConversion(t *testing.T) {
	inner := errors.New("bits flipped")
	cases := []struct {
		name string
		lw   error
		up   error
		is   func(error) bool
	}{
		{"not found", storage.NewKeyNotFoundError("/k", 3), k8sstorage.NewKeyNotFoundError("/k", 3), k8sstorage.IsNotFound},
		{"exists", storage.NewKeyExistsError("/k", 4), k8sstorage.NewKeyExistsError("/k", 4), k8sstorage.IsExist},
		{"conflict", storage.NewResourceVersionConflictsError("/k", 5), k8sstorage.NewResourceVersionConflictsError("/k", 5), k8sstorage.IsConflict},
		{"unreachable", &storage.StorageError{Code: storage.ErrCodeUnreachable, Key: "/k", ResourceVersion: 6}, k8sstorage.NewUnreachableError("/k", 6), k8sstorage.IsUnreachable},
		{"timeout", storage.NewTimeoutError("/k", "slow"), k8sstorage.NewTimeoutError("/k", "slow"), k8sstorage.IsRequestTimeout},
		{"invalid obj", storage.NewInvalidObjError("/k", "Precondition failed"), k8sstorage.NewInvalidObjError("/k", "Precondition failed"), k8sstorage.IsInvalidObj},
		{"corrupt", storage.NewCorruptObjError("/k", inner), k8sstorage.NewCorruptObjError("/k", inner), k8sstorage.IsCorruptObject},
		{"invalid", storage.NewInvalidError(field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), "x", "bad")}),
			k8sstorage.NewInvalidError(field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), "x", "bad")}), k8sstorage.IsInvalidError},
		{"internal", storage.NewInternalError(inner), k8sstorage.NewInternalError(inner), k8sstorage.IsInternalError},
		{"rv set on create", storage.ErrResourceVersionSetOnCreate, k8sstorage.ErrResourceVersionSetOnCreate,
			func(err error) bool { return errors.Is(err, k8sstorage.ErrResourceVersionSetOnCreate) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, lw := range []error{c.lw, fmt.Errorf("wrapped: %w", c.lw)} {
				got := ToUpstreamError(lw)
				if !c.is(got) {
					t.Errorf("ToUpstreamError(%v) = %#v: upstream does not recognise it", lw, got)
				}
				if got.Error() != c.up.Error() {
					t.Errorf("ToUpstreamError(%v) says %q, upstream says %q", lw, got.Error(), c.up.Error())
				}
			}
			back := ToListwatchError(c.up)
			if back.Error() != c.lw.Error() {
				t.Errorf("ToListwatchError(%v) says %q, listwatch says %q", c.up, back.Error(), c.lw.Error())
			}
			if reflect.TypeOf(back) != reflect.TypeOf(c.lw) {
				t.Errorf("ToListwatchError(%v) is a %T, want %T", c.up, back, c.lw)
			}
		})
	}
	other := errors.New("other")
	if ToUpstreamError(other) != other || ToListwatchError(other) != other {
		t.Error("an error without a storage counterpart is changed")
	}
	if ToUpstreamError(nil) != nil || ToListwatchError(nil) != nil {
		t.Error("nil is not nil")
	}
	f := &fakeStorage{err: fmt.Errorf("reading: %w", storage.NewKeyNotFoundError("/pods/a/b", 0))}
	if err := New(f, Options{}).Get(context.Background(), "/pods/a/b", k8sstorage.GetOptions{}, &example.Pod{}); !k8sstorage.IsNotFound(err) {
		t.Errorf("Get through the adapter: %v, want upstream's not found", err)
	}
}

// TestCallbacksConverted: preconditions, the update's response meta and the callbacks' errors
// cross the adapter in both directions.
func TestCallbacksConverted(t *testing.T) {
	f := &fakeStorage{}
	a := New(f, Options{})
	uid := types.UID("u")
	rv := "9"
	var seen k8sstorage.ResponseMeta
	update := func(_ runtime.Object, res k8sstorage.ResponseMeta) (runtime.Object, *uint64, error) {
		seen = res
		return nil, nil, k8sstorage.NewInvalidObjError("/k", "no")
	}
	if err := a.GuaranteedUpdate(context.Background(), "/pods/a/b", &example.Pod{}, false,
		&k8sstorage.Preconditions{UID: &uid, ResourceVersion: &rv}, update, nil); err != nil {
		t.Fatal(err)
	}
	if f.pre == nil || f.pre.UID != &uid || f.pre.ResourceVersion != &rv {
		t.Errorf("preconditions not carried: %+v", f.pre)
	}
	_, _, err := f.update(&example.Pod{}, storage.ResponseMeta{TTL: 4, ResourceVersion: 8})
	if seen != (k8sstorage.ResponseMeta{TTL: 4, ResourceVersion: 8}) {
		t.Errorf("response meta: %+v", seen)
	}
	if !storage.IsInvalidObj(err) {
		t.Errorf("the update's error reaches listwatch as %#v, want its InvalidObj", err)
	}

	validate := func(context.Context, runtime.Object) error { return k8sstorage.NewKeyNotFoundError("/k", 1) }
	if err := a.Delete(context.Background(), "/pods/a/b", &example.Pod{}, nil, validate, nil,
		k8sstorage.DeleteOptions{ExpectTransformOrDecodeError: true}); err != nil {
		t.Fatal(err)
	}
	if f.pre != nil || !f.del.ExpectTransformOrDecodeError {
		t.Errorf("delete arguments: %+v %+v", f.pre, f.del)
	}
	if err := f.validate(context.Background(), nil); !storage.IsNotFound(err) {
		t.Errorf("the validation's error reaches listwatch as %#v, want its KeyNotFound", err)
	}
}

// TestWatchPassesEvents: the watch is the storage's own.
func TestWatchPassesEvents(t *testing.T) {
	fw := watch.NewFake()
	f := &fakeStorage{watcher: fw}
	w, err := New(f, Options{}).Watch(context.Background(), "/pods/", k8sstorage.ListOptions{Predicate: k8sstorage.Everything})
	if err != nil {
		t.Fatal(err)
	}
	if w != fw {
		t.Errorf("Watch returned %T, want the storage's watch", w)
	}
	f.err = storage.NewKeyNotFoundError("/k", 0)
	if _, err := New(f, Options{}).Watch(context.Background(), "/pods/", k8sstorage.ListOptions{}); !k8sstorage.IsNotFound(err) {
		t.Errorf("Watch error %#v, want upstream's not found", err)
	}
}

// TestWatchCarriesRequestScope: the namespace and name upstream's Cacher.Watch reads from the
// apiserver's request context reach the storage as listwatch's RequestScope; without them, a scope
// the caller set is kept.
func TestWatchCarriesRequestScope(t *testing.T) {
	ns := request.WithNamespace(context.Background(), "b")
	named := request.WithRequestInfo(ns, &request.RequestInfo{IsResourceRequest: true, Verb: "watch", Resource: "pods", Namespace: "b", Name: "p1"})
	own := storage.WithRequestScope(context.Background(), storage.RequestScope{Namespace: "c"})
	for _, c := range []struct {
		name string
		ctx  context.Context
		want storage.RequestScope
	}{
		{"none", context.Background(), storage.RequestScope{}},
		{"namespace", ns, storage.RequestScope{Namespace: "b"}},
		{"namespace and name", named, storage.RequestScope{Namespace: "b", Name: "p1"}},
		{"listwatch's own", own, storage.RequestScope{Namespace: "c"}},
	} {
		f := &fakeStorage{watcher: watch.NewFake()}
		if _, err := New(f, Options{}).Watch(c.ctx, "/pods/", k8sstorage.ListOptions{Predicate: k8sstorage.Everything}); err != nil {
			t.Fatal(err)
		}
		if f.scope != c.want {
			t.Errorf("%s: the storage saw scope %+v, want %+v", c.name, f.scope, c.want)
		}
	}
}

type keyTransformer struct{ keys []string }

func (k *keyTransformer) TransformFromStorage(_ context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	k.keys = append(k.keys, string(dataCtx.AuthenticatedData()))
	if string(data) == "bad" {
		return nil, false, errors.New("cannot decrypt")
	}
	return data[1:], false, nil
}

func (k *keyTransformer) TransformToStorage(_ context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	k.keys = append(k.keys, string(dataCtx.AuthenticatedData()))
	return append([]byte("x"), data...), nil
}

// TestTransformer: the key is the authenticated data; a failure is the transformer's.
func TestTransformer(t *testing.T) {
	kt := &keyTransformer{}
	tr := Transformer(kt)
	out, err := tr.TransformToStorage(context.Background(), []byte("v"), "/registry/pods/a/b")
	if err != nil || string(out) != "xv" {
		t.Fatalf("TransformToStorage: %q %v", out, err)
	}
	back, _, err := tr.TransformFromStorage(context.Background(), out, "/registry/pods/a/b")
	if err != nil || string(back) != "v" {
		t.Fatalf("TransformFromStorage: %q %v", back, err)
	}
	if _, _, err := tr.TransformFromStorage(context.Background(), []byte("bad"), "/registry/pods/a/c"); err == nil {
		t.Error("a failing transformation did not fail")
	}
	want := []string{"/registry/pods/a/b", "/registry/pods/a/b", "/registry/pods/a/c"}
	if !reflect.DeepEqual(kt.keys, want) {
		t.Errorf("authenticated data %q, want %q", kt.keys, want)
	}
}

type compacting struct{ fakeStorage }

func (*compacting) CompactRevision() int64 { return 42 }

// TestReadinessAndCompactRevision: ReadinessCheck follows Ready; CompactRevision comes from the
// option, else the storage, else 0; the methods listwatch leaves out say so.
func TestReadinessAndCompactRevision(t *testing.T) {
	f := &fakeStorage{}
	a := New(f, Options{})
	if err := a.ReadinessCheck(); !errors.Is(err, k8sstorage.ErrStorageNotReady) {
		t.Errorf("not ready: %v, want ErrStorageNotReady", err)
	}
	f.ready = true
	if err := a.ReadinessCheck(); err != nil {
		t.Errorf("ready: %v", err)
	}
	if got := a.CompactRevision(); got != 0 {
		t.Errorf("CompactRevision without a source: %d", got)
	}
	if got := New(&compacting{}, Options{}).CompactRevision(); got != 42 {
		t.Errorf("CompactRevision from the storage: %d", got)
	}
	if got := New(f, Options{CompactRevision: func() int64 { return 5 }}).CompactRevision(); got != 5 {
		t.Errorf("CompactRevision from the option: %d", got)
	}
	if err := a.EnableResourceSizeEstimation(nil); !errors.Is(err, ErrNotSupported) {
		t.Errorf("EnableResourceSizeEstimation without one: %v", err)
	}
	if rv, err := a.GetCurrentResourceVersion(context.Background()); rv != 7 || err != nil {
		t.Errorf("GetCurrentResourceVersion: %d %v", rv, err)
	}
	if _, err := a.Versioner().ParseResourceVersion("x"); !k8sstorage.IsInvalidError(err) {
		t.Errorf("Versioner error %#v, want upstream's InvalidError", err)
	}
}

// TestStatsAndSizeEstimation: Stats answers with the storage's Stats, its errors converted;
// EnableResourceSizeEstimation reaches a storage that has one with the same keys function, and its
// error comes back.
func TestStatsAndSizeEstimation(t *testing.T) {
	f := &fakeStorage{stats: storage.Stats{ObjectCount: 3, EstimatedAverageObjectSizeBytes: 40}}
	a := New(f, Options{})
	got, err := a.Stats(context.Background())
	if err != nil || got != (k8sstorage.Stats{ObjectCount: 3, EstimatedAverageObjectSizeBytes: 40}) {
		t.Errorf("Stats: %+v %v", got, err)
	}
	f.err = storage.NewKeyNotFoundError("/pods/a", 0)
	if _, err := a.Stats(context.Background()); !k8sstorage.IsNotFound(err) {
		t.Errorf("Stats error %#v, want upstream's NotFound", err)
	}

	e := &estimating{}
	ea := New(e, Options{})
	if err := ea.EnableResourceSizeEstimation(func(context.Context) ([]string, error) { return []string{"/pods/a/b"}, nil }); err != nil {
		t.Fatal(err)
	}
	if keys, err := e.keys(context.Background()); err != nil || !reflect.DeepEqual(keys, []string{"/pods/a/b"}) {
		t.Errorf("the storage's keys function answered %v %v", keys, err)
	}
	if err := ea.EnableResourceSizeEstimation(nil); err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("EnableResourceSizeEstimation(nil): %v, want the storage's error", err)
	}
}

// TestWatchCarriesInitializationSignal: API Priority and Fairness's initialization signal in the
// request context is what listwatch's storage.WatchInitialized signals, once however often it is
// called; a listwatch signal already in the context is signalled too, and a context without either
// is fine.
func TestWatchCarriesInitializationSignal(t *testing.T) {
	apf := utilflowcontrol.NewInitializationSignal()
	own := 0
	ctx := storage.WithWatchInitializedSignal(context.Background(), func() { own++ })
	ctx = utilflowcontrol.WithInitializationSignal(ctx, apf)
	f := &fakeStorage{watcher: watch.NewFake()}
	if _, err := New(f, Options{}).Watch(ctx, "/pods/", k8sstorage.ListOptions{Predicate: k8sstorage.Everything}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		apf.Wait()
	}()
	select {
	case <-done:
		t.Fatal("signalled before the storage signalled")
	default:
	}
	storage.WatchInitialized(f.watchCtx)
	storage.WatchInitialized(f.watchCtx)
	select {
	case <-done:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("API Priority and Fairness's signal never came")
	}
	if own != 1 {
		t.Errorf("listwatch's own signal called %d times, want 1", own)
	}

	if _, err := New(f, Options{}).Watch(context.Background(), "/pods/", k8sstorage.ListOptions{Predicate: k8sstorage.Everything}); err != nil {
		t.Fatal(err)
	}
	storage.WatchInitialized(f.watchCtx)
}
