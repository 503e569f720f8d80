package etcdsnap

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-semver/semver"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/store"
)

// StorageVersion is the storage version the written databases declare, etcd v3.7's.
var StorageVersion = semver.Version{Major: 3, Minor: 7}

// Meta is what a database records of the raft log besides the keys: the consistent index (the raft
// index last applied) and the term.
type Meta struct {
	ConsistentIndex uint64
	Term            uint64
}

// ErrBadFile is returned by Load for a file that is not an etcd snapshot; the error says what is
// wrong with it.
var ErrBadFile = errors.New("not an etcd snapshot")

// WriteDB writes snap as an etcd backend database at path (which must not exist): every bucket an
// etcd member creates, each retained revision in the key bucket under its revision key, the compact
// revision as scheduled and finished compaction, the leases, the consistent index and term, and the
// storage version. It writes through etcd's own backend and schema packages.
func WriteDB(path string, snap *store.Snapshot, meta Meta) (err error) {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("etcdsnap: %s exists", path)
	}
	be := backend.NewDefaultBackend(zap.NewNop(), path)
	defer func() {
		if cerr := be.Close(); err == nil {
			err = cerr
		}
	}()
	tx := be.BatchTx()
	tx.LockOutsideApply()
	defer tx.Unlock()
	for _, b := range schema.AllBuckets {
		tx.UnsafeCreateBucket(b)
	}
	for _, r := range snap.Records {
		key := mvcc.RevToBytes(mvcc.Revision{Main: r.KV.ModRevision, Sub: r.Sub}, mvcc.NewRevBytes())
		kv := &mvccpb.KeyValue{Key: r.KV.Key}
		if r.Tombstone {
			key = append(key, 't') // mvcc's tombstone mark; mvcc.IsTombstone recognises it
		} else {
			kv = &mvccpb.KeyValue{Key: r.KV.Key, CreateRevision: r.KV.CreateRevision, ModRevision: r.KV.ModRevision,
				Version: r.KV.Version, Value: r.KV.Value, Lease: r.KV.Lease}
		}
		v, err := proto.Marshal(kv)
		if err != nil {
			return fmt.Errorf("etcdsnap: encoding %q at %d: %w", r.KV.Key, r.KV.ModRevision, err)
		}
		tx.UnsafeSeqPut(schema.Key, key, v)
	}
	if snap.CompactRevision > 0 {
		mvcc.UnsafeSetScheduledCompact(tx, snap.CompactRevision)
		mvcc.UnsafeSetFinishedCompact(tx, snap.CompactRevision)
	}
	for _, l := range snap.Leases {
		schema.MustUnsafePutLease(tx, &leasepb.Lease{ID: l.ID, TTL: l.TTL, RemainingTTL: l.RemainingTTL})
	}
	schema.UnsafeUpdateConsistentIndex(tx, meta.ConsistentIndex, meta.Term)
	schema.UnsafeSetStorageVersion(tx, &StorageVersion)
	return nil
}

// File is a database written for a snapshot stream: Size bytes to read, then the SHA-256 of them,
// as etcd's Maintenance.Snapshot sends and etcdctl snapshot save stores.
type File struct {
	*os.File
	Size int64
	dir  string
}

// Close closes and removes the file.
func (f *File) Close() error {
	err := f.File.Close()
	if rerr := os.RemoveAll(f.dir); err == nil {
		err = rerr
	}
	return err
}

// Create writes snap as a database in a new directory under dir ("" for the system's temporary
// directory) and opens it for reading; Close removes it.
func Create(dir string, snap *store.Snapshot, meta Meta) (*File, error) {
	tmp, err := os.MkdirTemp(dir, "etcdsnap-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(tmp, "db")
	if err := WriteDB(path, snap, meta); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	snapPath := filepath.Join(tmp, "snap")
	size, err := copyDB(path, snapPath)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	f, err := os.Open(snapPath)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return &File{File: f, Size: size, dir: tmp}, nil
}

// copyDB copies the database at from to to as etcd's backend Snapshot does, through a bbolt read
// transaction's WriteTo: the pages in use only, not the room bbolt allocated ahead in the file.
func copyDB(from, to string) (int64, error) {
	db, err := bolt.Open(from, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(out)
		return err
	})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// Load reads an etcd snapshot file, as etcdctl snapshot save writes it (the database, then its
// SHA-256, which Load checks) or a bare database (a member's member/snap/db), into a store
// snapshot: the key bucket's revisions, the leases, and the compact revision (the scheduled one,
// which a member finishes when it starts; Load's caller compacts to it). It reads through etcd's
// backend and schema packages; a file that is not such a database fails with ErrBadFile.
func Load(path string) (*store.Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// etcdutl's snapshot restore: a stored hash makes the size 512k+32
	if len(data)%512 == sha256.Size {
		db, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
		if h := sha256.Sum256(db); !bytes.Equal(h[:], sum) {
			return nil, fmt.Errorf("%w: %s: the SHA-256 at its end does not match its contents", ErrBadFile, path)
		}
		data = db
	}
	tmp, err := os.MkdirTemp("", "etcdsnap-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dbPath := filepath.Join(tmp, "db")
	if err := os.WriteFile(dbPath, data, 0o600); err != nil {
		return nil, err
	}
	// etcd's backend panics on a file bbolt cannot open: check with bbolt first
	db, err := bolt.Open(dbPath, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadFile, path, err)
	}
	hasKeys := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(schema.Key.Name()) == nil || tx.Bucket(schema.Meta.Name()) == nil {
			return fmt.Errorf("%w: %s has no key or meta bucket", ErrBadFile, path)
		}
		return nil
	})
	if err := db.Close(); err != nil {
		return nil, err
	}
	if hasKeys != nil {
		return nil, hasKeys
	}
	return readDB(dbPath)
}

func readDB(path string) (snap *store.Snapshot, err error) {
	be := backend.NewDefaultBackend(zap.NewNop(), path, backend.WithTimeout(0))
	defer func() {
		if cerr := be.Close(); err == nil {
			err = cerr
		}
	}()
	tx := be.ReadTx()
	tx.RLock()
	defer tx.RUnlock()
	snap = &store.Snapshot{CompactRevision: -1}
	if rev, ok := mvcc.UnsafeReadScheduledCompact(tx); ok {
		snap.CompactRevision = rev
	} else if rev, ok := mvcc.UnsafeReadFinishedCompact(tx); ok {
		snap.CompactRevision = rev
	}
	err = tx.UnsafeForEach(schema.Key, func(k, v []byte) error {
		r, err := decodeRecord(k, v)
		if err != nil {
			return err
		}
		snap.Records = append(snap.Records, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.UnsafeForEach(schema.Lease, func(k, v []byte) error {
		var l leasepb.Lease
		if err := proto.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("%w: lease %x: %v", ErrBadFile, k, err)
		}
		snap.Leases = append(snap.Leases, store.SnapshotLease{ID: l.ID, TTL: l.TTL, RemainingTTL: l.RemainingTTL})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n := len(snap.Records); n > 0 {
		snap.Revision = snap.Records[n-1].KV.ModRevision
	}
	return snap, nil
}

// decodeRecord reads one entry of the key bucket.
func decodeRecord(k, v []byte) (store.SnapshotRecord, error) {
	if (len(k) != 17 && len(k) != 18) || k[8] != '_' || k[0]&0x80 != 0 || k[9]&0x80 != 0 {
		return store.SnapshotRecord{}, fmt.Errorf("%w: key bucket entry %x is not a revision", ErrBadFile, k)
	}
	bk := mvcc.BytesToBucketKey(k)
	var kv mvccpb.KeyValue
	if err := proto.Unmarshal(v, &kv); err != nil {
		return store.SnapshotRecord{}, fmt.Errorf("%w: revision %d: %v", ErrBadFile, bk.Main, err)
	}
	r := store.SnapshotRecord{Sub: bk.Sub, Tombstone: mvcc.IsTombstone(k)}
	r.KV = store.KeyValue{Key: kv.Key, ModRevision: bk.Main}
	if !r.Tombstone {
		r.KV = store.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
			Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
	}
	return r, nil
}

// ChunkBytes is the size of the chunks Stream sends, etcd's snapshotSendBufferSize.
const ChunkBytes = 32 * 1024

// Stream sends the file as etcd's Maintenance.Snapshot does (v3rpc/maintenance.go Snapshot): chunks
// of ChunkBytes, each with the bytes that remain after it, then the SHA-256 of all of them with
// nothing remaining.
func (f *File) Stream(send func(blob []byte, remaining int64) error) error {
	h := sha256.New()
	var sent int64
	for sent < f.Size {
		buf := make([]byte, min(ChunkBytes, f.Size-sent))
		if _, err := io.ReadFull(f.File, buf); err != nil {
			return err
		}
		sent += int64(len(buf))
		h.Write(buf)
		if err := send(buf, f.Size-sent); err != nil {
			return err
		}
	}
	return send(h.Sum(nil), 0)
}
