package runplan

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func draw(r interface{ Uint64() uint64 }) [4]uint64 {
	var out [4]uint64
	for i := range out {
		out[i] = r.Uint64()
	}
	return out
}

func TestRandStreams(t *testing.T) {
	a := draw(Rand(7, 1, 0))
	if b := draw(Rand(7, 1, 0)); a != b {
		t.Fatalf("same seed, role and index drew %v and %v", a, b)
	}
	for _, other := range []struct {
		seed, role uint64
		index      int
	}{{8, 1, 0}, {7, 2, 0}, {7, 1, 1}} {
		if b := draw(Rand(other.seed, other.role, other.index)); a == b {
			t.Errorf("%+v drew the same stream as (7, 1, 0): %v", other, b)
		}
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		ops     int64
		clients int
		want    []int64
	}{
		{0, 3, []int64{-1, -1, -1}},
		{10, 3, []int64{4, 3, 3}},
		{11, 3, []int64{4, 4, 3}},
		{12, 3, []int64{4, 4, 4}},
		{2, 4, []int64{1, 1, 0, 0}},
		{5, 1, []int64{5}},
	} {
		var sum int64
		for i, want := range tc.want {
			got := Share(tc.ops, tc.clients, i)
			if got != want {
				t.Errorf("Share(%d, %d, %d) = %d, want %d", tc.ops, tc.clients, i, got, want)
			}
			sum += got
		}
		if tc.ops > 0 && sum != tc.ops {
			t.Errorf("Share(%d, %d, *) adds up to %d", tc.ops, tc.clients, sum)
		}
	}
}
