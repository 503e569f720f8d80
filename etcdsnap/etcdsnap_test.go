package etcdsnap_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdsnap"
	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// history builds a store with a txn revision, a deletion, a lease and a compaction.
func history(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(store.Options{ManualTick: true, Clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))})
	t.Cleanup(func() { st.Close() })
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	put := func(k, v string, lease int64) {
		must(st.Put(&store.PutRequest{Key: []byte(k), Value: []byte(v), Lease: lease}))
	}
	put("a", "1", 0)
	put("b", "1", 0)
	l, err := st.LeaseGrant(0, 30)
	must(l, err)
	put("c", "leased", l.ID)
	must(st.DeleteRange(&store.DeleteRangeRequest{Key: []byte("a")}))
	must(st.Txn(&store.TxnRequest{Success: []store.RequestOp{
		{Put: &store.PutRequest{Key: []byte("d"), Value: []byte("1")}},
		{DeleteRange: &store.DeleteRangeRequest{Key: []byte("b")}},
	}}))
	put("a", "again", 0)
	must(st.Compact(4))
	put("e", "", 0)
	return st
}

func TestRoundTrip(t *testing.T) {
	st := history(t)
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "db")
	if err := etcdsnap.WriteDB(path, snap, etcdsnap.Meta{ConsistentIndex: 9, Term: 2}); err != nil {
		t.Fatal(err)
	}
	if err := etcdsnap.WriteDB(path, snap, etcdsnap.Meta{}); err == nil {
		t.Fatal("WriteDB over an existing file succeeded")
	}
	got, err := etcdsnap.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snap, got); diff != "" {
		t.Fatalf("loaded snapshot differs (-written +loaded):\n%s", diff)
	}
	r, err := store.Restore(store.Options{ManualTick: true}, got)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// above the compact revision, where the original answers the hash its compaction kept
	for rev := snap.CompactRevision + 1; rev <= snap.Revision; rev++ {
		a, _, _ := st.HashKV(rev)
		b, _, err := r.HashKV(rev)
		if err != nil || a != b {
			t.Fatalf("HashKV(%d): original %+v, restored %+v, %v", rev, a, b, err)
		}
	}
}

func TestStreamAndHash(t *testing.T) {
	st := history(t)
	// enough data for several chunks
	for i := range 100 {
		if _, err := st.Put(&store.PutRequest{Key: []byte{'k', byte(i)}, Value: bytes.Repeat([]byte{'v'}, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := st.Snapshot()
	f, err := etcdsnap.Create(t.TempDir(), snap, etcdsnap.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	var saved bytes.Buffer
	var remaining []int64
	err = f.Stream(func(blob []byte, rem int64) error {
		saved.Write(blob)
		remaining = append(remaining, rem)
		return nil
	})
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	n := int64(saved.Len() - sha256.Size)
	// the pages in use, not the 16 MiB bbolt allocates ahead in its file (about 100 KB of values)
	if n > 1<<20 {
		t.Fatalf("snapshot of about 100 KB of data has %d bytes", n)
	}
	if n != f.Size || n%4096 != 0 || len(remaining) < 3 {
		t.Fatalf("streamed %d bytes in %d messages for a file of %d", n, len(remaining), f.Size)
	}
	for i, rem := range remaining[:len(remaining)-1] {
		if want := max(f.Size-int64(i+1)*etcdsnap.ChunkBytes, 0); rem != want {
			t.Fatalf("message %d: remaining %d, want %d", i, rem, want)
		}
	}
	sum := sha256.Sum256(saved.Bytes()[:n])
	if !bytes.Equal(sum[:], saved.Bytes()[n:]) || remaining[len(remaining)-1] != 0 {
		t.Fatalf("last message is not the SHA-256 of the database")
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, saved.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := etcdsnap.Load(path)
	if err != nil || len(got.Records) != len(snap.Records) {
		t.Fatalf("Load of the saved stream: %v", err)
	}
	// a flipped byte fails the hash check
	b := saved.Bytes()
	b[100] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdsnap.Load(path); !errors.Is(err, etcdsnap.ErrBadFile) {
		t.Fatalf("Load of a corrupted snapshot = %v, want ErrBadFile", err)
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not bbolt"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdsnap.Load(junk); !errors.Is(err, etcdsnap.ErrBadFile) {
		t.Fatalf("Load(junk) = %v, want ErrBadFile", err)
	}
	if _, err := etcdsnap.Load(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want not exist", err)
	}
}
