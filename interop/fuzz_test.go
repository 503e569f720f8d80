package interop

import (
	"math/rand/v2"
	"testing"
)

// FuzzDifferential is the differential test with the fuzzer choosing the operations: its bytes are
// the random source of the workload's generator (workload_test.go), so they pick each operation and
// its arguments — puts, deletes, txns with compares and nested txns, ranges with every option,
// compactions, leases, watches from past revisions with prev_kv and filters, progress requests,
// cancels, raw watch streams, a txn that puts and deletes one key followed by a compaction at its
// revision and a watch from there — and the run ends when they are used up. Each input runs on a fresh
// embedded etcd and a fresh listwatch, through clientv3 on both, and every answer and every watch
// stream must be equal after the normalisation of normalize_test.go and watchcheck_test.go.
//
// `go test` replays the seeds in testdata/fuzz/FuzzDifferential; `go test -run '^$' -fuzz
// FuzzDifferential -parallel 1` explores (each input starts an etcd, so a few inputs a second).
// The heavier once-per-seed scenarios (lease expiry, write bursts, 2 MiB values) stay with
// TestDifferentialEtcdVsListwatch: they take seconds each.
func FuzzDifferential(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			data = data[:maxFuzzInput]
		}
		ref, other := etcdVsListwatch(t)
		src := &fuzzSource{data: data}
		r := newRunner(t, "fuzz input", rand.New(src), ref, other, knownDifferences)
		r.more = src.more
		runWorkload(t, r, maxFuzzOps)
	})
}

const (
	// maxFuzzInput bounds the bytes an input may spend, and with them the time it takes.
	maxFuzzInput = 16 << 10
	// maxFuzzOps bounds the operations of one input.
	maxFuzzOps = 400
)

// fuzzSource is a rand.Source that reads the fuzzer's bytes two at a time: each pair p is one draw,
// p in the top 16 bits and ones below, so that rand.IntN(n) is p*n/65536 for every n below 65536
// (the ones keep rand's rejection sampling from ever refusing it) and a mutation of a pair changes
// one choice. Past the end, where the operation under way finishes, it draws from splitmix64.
// more reports whether any byte is left.
type fuzzSource struct {
	data []byte
	off  int
}

func (s *fuzzSource) Uint64() uint64 {
	if s.off >= len(s.data) {
		s.off++
		z := uint64(s.off) * 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	v := uint64(s.data[s.off]) << 8
	if s.off+1 < len(s.data) {
		v |= uint64(s.data[s.off+1])
	}
	s.off += 2
	return v<<48 | (1<<48 - 1)
}

func (s *fuzzSource) more() bool { return s.off < len(s.data) }

// TestFuzzSource: the draws follow the bytes, and the end of the input is seen.
func TestFuzzSource(t *testing.T) {
	src := &fuzzSource{data: []byte{0x00, 0x00, 0xff, 0xff, 0x80}}
	rnd := rand.New(src)
	if got := rnd.IntN(100); got != 0 {
		t.Errorf("first draw %d, want 0", got)
	}
	if got := rnd.IntN(100); got != 99 {
		t.Errorf("second draw %d, want 99", got)
	}
	if !src.more() {
		t.Error("one byte left, but more() is false")
	}
	if got := rnd.IntN(100); got != 50 {
		t.Errorf("third draw %d, want 50", got)
	}
	if src.more() {
		t.Error("input used up, but more() is true")
	}
	for range 1000 {
		rnd.IntN(3) // past the end draws go on, and none is rejected forever
	}
}
