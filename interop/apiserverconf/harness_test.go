package apiserverconf

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// faultEnv names the fault, if any, that the listwatch backend's client injects; only
// TestHarnessCatchesFault sets it, in the test binary it runs.
const faultEnv = "APISERVERCONF_FAULT"

// faultRangeDropsLast drops the last key of every range answer with more than one, and lowers its
// count to match, as an off-by-one at a range end would; a RangeStream answer is its chunks together.
const faultRangeDropsLast = "range-drops-last-key"

// injectFault configures the listwatch backend's client with the fault faultEnv names.
func injectFault(cfg *clientv3.Config) {
	if os.Getenv(faultEnv) == faultRangeDropsLast {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(dropLastRangeKey),
			grpc.WithChainStreamInterceptor(dropLastStreamedKey))
	}
}

func dropLastStreamedKey(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.KV_RangeStream_FullMethodName {
		return cs, err
	}
	return &droppingStream{ClientStream: cs}, nil
}

// droppingStream drops the last key of a RangeStream from its last chunk, the one with the header.
type droppingStream struct {
	grpc.ClientStream
	keys int
}

func (s *droppingStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	rr := m.(*pb.RangeStreamResponse).GetRangeResponse()
	s.keys += len(rr.GetKvs())
	if rr.GetHeader() != nil && s.keys > 1 && len(rr.Kvs) > 0 {
		rr.Kvs = rr.Kvs[:len(rr.Kvs)-1]
		rr.Count--
	}
	return nil
}

func dropLastRangeKey(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	if resp, ok := reply.(*pb.RangeResponse); ok && method == pb.KV_Range_FullMethodName && len(resp.Kvs) > 1 {
		resp.Kvs = resp.Kvs[:len(resp.Kvs)-1]
		resp.Count--
	}
	return nil
}

// TestHarnessCatchesFault runs one conformance function in a child test binary whose listwatch
// backend drops the last key of multi-key ranges, and requires the function to fail there and
// only there.
func TestHarnessCatchesFault(t *testing.T) {
	if os.Getenv(faultEnv) != "" {
		t.Skip("inside the child run")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStorageConformance$/^GetListRecursivePrefix$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), faultEnv+"="+faultRangeDropsLast)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child run: %v, want it to fail\n%s", err, out)
	}
	for _, want := range []string{
		"--- PASS: TestStorageConformance/GetListRecursivePrefix/etcd ",
		"--- FAIL: TestStorageConformance/GetListRecursivePrefix/listwatch ",
		"incorrect list pods",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child run output lacks %q:\n%s", want, out)
		}
	}
}
