package kinetest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, GoleakOptions()...) }

func TestStartServesAndStops(t *testing.T) {
	ep, stop, err := Start(t.TempDir(), Options{CompactMinRetain: DefaultCompactMinRetain})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Fatalf("get: %v %v", resp, err)
	}
	cli.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}
