package interop

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/interop/internal/seeds"
)

// startEtcd starts an embedded etcd for the test and returns it as a side; it is stopped at cleanup.
func startEtcd(t testing.TB, name string) *side {
	t.Helper()
	cli, stop, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
	})
	return newSide(name, cli)
}

func flagSeeds(defaults ...uint64) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	return defaults
}

// seedsEnv chooses the seeds of TestDifferentialEtcdVsListwatch for a long run: seeds and ranges
// of seeds separated by commas, such as "1-500" or "3,7,100-120". -interop.seed overrides it.
const seedsEnv = "LISTWATCH_INTEROP_SEEDS"

// differentialSeeds returns -interop.seed, else the seeds seedsEnv lists, else the defaults.
func differentialSeeds(t *testing.T, defaults ...uint64) []uint64 {
	if v := os.Getenv(seedsEnv); *flagSeed == 0 && v != "" {
		list, err := seeds.Parse(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedsEnv, v, err)
		}
		return list
	}
	return flagSeeds(defaults...)
}

// TestDefuseIgnoreAfterFromKeyDelete: a put with ignore_value or ignore_lease after a delete from a
// key at or below its own, in the same txn (nested ones included), loses the flags; others keep them.
func TestDefuseIgnoreAfterFromKeyDelete(t *testing.T) {
	ignore := func(k string) opSpec { return opSpec{Put: &putSpec{Key: k, IgnoreValue: true, IgnoreLease: true}} }
	t1 := &txnSpec{
		Then: []opSpec{ignore("a"), {Del: &delSpec{Sel: keySel{Key: "b", Mode: selFromKey}}}, ignore("a/1"), ignore("c"),
			{Txn: &txnSpec{Else: []opSpec{ignore("z")}}}},
		Else: []opSpec{ignore("c"), {Del: &delSpec{Sel: keySel{Key: "b", Mode: selPrefix}}}, ignore("b/1")},
	}
	defuseIgnoreAfterFromKeyDelete(t1)
	flags := func(op opSpec) bool { return op.Put.IgnoreValue || op.Put.IgnoreLease }
	got := []bool{flags(t1.Then[0]), flags(t1.Then[2]), flags(t1.Then[3]), flags(t1.Then[4].Txn.Else[0]), flags(t1.Else[0]), flags(t1.Else[2])}
	want := []bool{true, true, false, false, true, true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ignore flags kept: %v, want %v", got, want)
	}
}

// TestRecreatesAKey: a txn may re-create a key when a put follows a delete from a key at or below
// it in the same branch (nested txns included); a put before the delete, or above no delete's key,
// does not.
func TestRecreatesAKey(t *testing.T) {
	put := func(k string) opSpec { return opSpec{Put: &putSpec{Key: k}} }
	from := func(k string) opSpec { return opSpec{Del: &delSpec{Sel: keySel{Key: k, Mode: selFromKey}}} }
	prefix := func(k string) opSpec { return opSpec{Del: &delSpec{Sel: keySel{Key: k, Mode: selPrefix}}} }
	for _, c := range []struct {
		name string
		t    txnSpec
		want bool
	}{
		{"delete from the key, then put", txnSpec{Then: []opSpec{from("b"), put("b")}}, true},
		{"delete from below, then put", txnSpec{Else: []opSpec{from("a"), put("b")}}, true},
		{"put, then delete from the key", txnSpec{Then: []opSpec{put("b"), from("b")}}, false},
		{"delete from above, then put", txnSpec{Then: []opSpec{from("c"), put("b")}}, false},
		{"prefix delete, then put", txnSpec{Then: []opSpec{prefix("b"), put("c")}}, false},
		{"the delete in one branch, the put in the other", txnSpec{Then: []opSpec{from("a")}, Else: []opSpec{put("b")}}, false},
		{"put in a nested txn", txnSpec{Then: []opSpec{from("a"), {Txn: &txnSpec{Else: []opSpec{put("b")}}}}}, true},
	} {
		if got := recreatesAKey(&c.t); got != c.want {
			t.Errorf("%s: recreatesAKey = %v, want %v", c.name, got, c.want)
		}
	}
}

func opsPerSeed(def int) int {
	if *flagOps > 0 {
		return *flagOps
	}
	return def
}

// runDifferential runs the workload for each seed against a fresh pair of sides.
func runDifferential(t *testing.T, ops int, seedList []uint64, newSides func(t *testing.T) (ref, other *side), excluded map[string]string) {
	for _, seed := range seedList {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ref, other := newSides(t)
			runSeed(t, t, seed, ops, ref, other, excluded, true)
		})
	}
}

// runSeed runs one seed's workload, reporting differences to rep, and stops every watch. With
// scenarios it also runs the heavier once-per-seed scenarios (lease expiry, a write burst past one
// catch-up batch, values over the fragmentation threshold).
func runSeed(t testing.TB, rep reporter, seed uint64, ops int, ref, other *side, excluded map[string]string, scenarios bool) *runner {
	r := newSeedRunner(rep, seed, ref, other, excluded)
	r.scenarios = scenarios
	runWorkload(t, r, ops)
	return r
}

// workloadTimeout bounds one run of the workload.
const workloadTimeout = 5 * time.Minute

// runWorkload runs r for at most ops operations (fewer if r.more ends the run first), drains and
// compares everything, logs r's summary and stops every watch. The seeded runs and
// FuzzDifferential both run through it.
func runWorkload(t testing.TB, r *runner, ops int) {
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	r.ctx = ctx
	start := time.Now()
	r.run(ops)
	t.Logf("%s in %v", r.summary(), time.Since(start).Round(time.Millisecond))
	for _, s := range r.sides {
		if err := s.stopWatches(); err != nil {
			t.Error(err)
		}
	}
}

// TestHarnessEtcdVsEtcd runs the workload against two embedded etcds. They must agree on
// everything the comparison looks at: this shows the harness compares only what is deterministic,
// so that a difference against listwatch is listwatch's.
func TestHarnessEtcdVsEtcd(t *testing.T) {
	runDifferential(t, opsPerSeed(250), flagSeeds(7), func(t *testing.T) (*side, *side) {
		return startEtcd(t, "etcd"), startEtcd(t, "etcd2")
	}, nil)
}

// recorder is a reporter that keeps what it is told, for tests of the harness itself.
type recorder struct {
	errors []string
	logs   []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Failed() bool { return len(r.errors) > 0 }

func (r *recorder) count(substr string) int {
	n := 0
	for _, e := range r.errors {
		if strings.Contains(e, substr) {
			n++
		}
	}
	return n
}

// TestHarnessCatchesDifferences shows the comparison failing when the sides differ: in stored data
// (one side has an extra write before the run), and in a watch stream, clientv3 or raw (one side
// drops an event).
func TestHarnessCatchesDifferences(t *testing.T) {
	const seed, ops = 7, 120
	t.Run("extra write", func(t *testing.T) {
		ref, other := startEtcd(t, "etcd"), startEtcd(t, "etcd2")
		if _, err := other.cli.Put(context.Background(), "unrelated", "x"); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		r := runSeed(t, rec, seed, ops, ref, other, nil, false)
		if r.diffs == 0 || rec.count("revision") == 0 {
			t.Fatalf("an extra revision on one side went unnoticed: %d differences, errors %q", r.diffs, rec.errors)
		}
		t.Logf("%d differences reported, first: %.300s", r.diffs, rec.errors[0])
	})
	t.Run("dropped event", func(t *testing.T) {
		ref, other := startEtcd(t, "etcd"), startEtcd(t, "etcd2")
		var dropped atomic.Bool
		other.mangle = func(wr *clientv3.WatchResponse) {
			if len(wr.Events) > 0 && dropped.CompareAndSwap(false, true) {
				wr.Events = wr.Events[:len(wr.Events)-1]
			}
		}
		rec := &recorder{}
		r := runSeed(t, rec, seed, ops, ref, other, nil, false)
		if !dropped.Load() {
			t.Fatal("the workload delivered no watch event to drop")
		}
		if rec.count(" watch ") == 0 {
			t.Fatalf("a dropped watch event went unnoticed: %d differences, errors %q", r.diffs, rec.errors)
		}
		t.Logf("%d differences reported, first: %.300s", r.diffs, rec.errors[0])
	})
	t.Run("dropped raw event", func(t *testing.T) {
		ref, other := startEtcd(t, "etcd"), startEtcd(t, "etcd2")
		var dropped atomic.Bool
		other.mangleRaw = func(wr *pb.WatchResponse) {
			if len(wr.Events) > 0 && dropped.CompareAndSwap(false, true) {
				wr.Events = wr.Events[1:]
			}
		}
		rec := &recorder{}
		r := runSeed(t, rec, seed, 2*ops, ref, other, nil, false)
		if !dropped.Load() {
			t.Fatal("the workload delivered no raw watch event to drop")
		}
		if rec.count("raw-watch") == 0 {
			t.Fatalf("a dropped raw watch event went unnoticed: %d differences, errors %q", r.diffs, rec.errors)
		}
		t.Logf("%d differences reported, first: %.300s", r.diffs, rec.errors[0])
	})
}

// startListwatch serves a fresh store through etcdgrpc's in-process client and returns it as a side;
// it is stopped at cleanup. The store takes the lease TTL floor the embedded etcd computes from its
// election timeout, and the member ID etcdgrpc presents, as an etcd member would.
func startListwatch(t testing.TB, name string) *side {
	t.Helper()
	return newSide(name, etcdtest.Listwatch(t, 0))
}

// knownDifferences lists op kinds left out of the etcd-vs-listwatch run because of a difference
// already recorded, so that the rest of the workload still runs; each entry names the difference
// and the run logs it. Empty: the default seeds find no difference.
var knownDifferences = map[string]string{}

// etcdVsListwatch starts the two sides of the differential test and of FuzzDifferential: a fresh
// embedded etcd, the reference, and a fresh listwatch.
func etcdVsListwatch(t *testing.T) (ref, other *side) {
	return startEtcd(t, "etcd"), startListwatch(t, "listwatch")
}

// TestDifferentialEtcdVsListwatch runs the workload against an embedded etcd and against listwatch
// and requires every answer and every watch stream to be equal.
func TestDifferentialEtcdVsListwatch(t *testing.T) {
	ops, defaults := 500, []uint64{1, 2, 3, 4}
	if testing.Short() {
		ops, defaults = 200, []uint64{1}
	}
	runDifferential(t, opsPerSeed(ops), differentialSeeds(t, defaults...), etcdVsListwatch, knownDifferences)
}
