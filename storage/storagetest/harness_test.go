package storagetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/storage/storagetest/backend"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// filteredStore is an etcd3 storage whose watches pass through filter, to make it misbehave.
type filteredStore struct {
	*watch.Store
	filter apiwatch.FilterFunc
}

func (s filteredStore) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	w, err := s.Store.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return apiwatch.Filter(w, s.filter), nil
}

func caseNamed(t *testing.T, name string) storagetest.Case {
	t.Helper()
	for _, c := range storagetest.Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return storagetest.Case{}
}

// TestPlayFailsOnDeviation: a case played against a faithful storage yields its Want; against a
// storage whose watch turns MODIFIED into ADDED the transcript differs, and against one whose watch
// delivers nothing Play fails once Env.Timeout has passed instead of passing silently.
func TestPlayFailsOnDeviation(t *testing.T) {
	c := caseNamed(t, "WatchFromNonZero")
	for _, tc := range []struct {
		name     string
		filter   apiwatch.FilterFunc
		wantDiff string // a line the transcript must have instead of Want's
		wantErr  string
	}{
		{name: "faithful"},
		{name: "wrong event type", filter: func(e apiwatch.Event) (apiwatch.Event, bool) {
			if e.Type == apiwatch.Modified {
				e.Type = apiwatch.Added
			}
			return e, true
		}, wantDiff: "w ADDED test-ns/foo rv=+2 annotations=version=2"},
		{name: "no events", filter: func(apiwatch.Event) (apiwatch.Event, bool) { return apiwatch.Event{}, false },
			wantErr: "WatchFromNonZero: w: no event within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := backend.NewInProcess(store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := b.Close(); err != nil {
					t.Errorf("close backend: %v", err)
				}
			}()
			env := storagetest.Env{Client: b.Client, Timeout: time.Second}
			if tc.filter != nil {
				env.NewStorage = func(cfg watch.Config) (storage.Interface, error) {
					s, err := watch.New(b.Client, cfg)
					return filteredStore{Store: s, filter: tc.filter}, err
				}
			}
			got, err := c.Play(context.Background(), env)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Play: %v, want an error containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("Play: %v", err)
			case tc.wantDiff == "":
				if diff := cmp.Diff(c.Want, got); diff != "" {
					t.Errorf("transcript mismatch (-want +got):\n%s", diff)
				}
			default:
				if cmp.Equal(c.Want, got) || !strings.Contains(strings.Join(got, "\n"), tc.wantDiff) {
					t.Errorf("transcript %q, want one with %q", got, tc.wantDiff)
				}
			}
		})
	}
}
