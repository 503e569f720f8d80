// Package watchsuite wires the etcd3 storage (watch.Store) into the storage/storagetest suite, which
// takes its storage from its caller, as upstream's etcd3 store_test.go hands its store to
// pkg/storage/testing. The watch, cache and interop conformance tests use it.
package watchsuite

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/watch"
)

// Config returns the etcd3 storage configuration a case asks for.
func Config(cfg storagetest.Config) watch.Config {
	return watch.Config{
		Prefix:         cfg.Prefix,
		ResourcePrefix: cfg.ResourcePrefix,
		GroupResource:  cfg.GroupResource,
		Codec:          cfg.Codec,
		Transformer:    cfg.Transformer,
		Logger:         cfg.Logger,
		Features:       watch.Features{DisableWatchList: cfg.DisableWatchList},
	}
}

// NewStorage returns a storagetest.Env.NewStorage that builds watch.New over client; features, when
// set, changes the feature gates of every storage it builds.
func NewStorage(client *clientv3.Client, features func(*watch.Features)) func(storagetest.Config) (storage.Interface, error) {
	return func(cfg storagetest.Config) (storage.Interface, error) {
		wc := Config(cfg)
		if features != nil {
			features(&wc.Features)
		}
		return watch.New(client, wc)
	}
}

// Env returns the environment that plays the cases against the etcd3 storage over client.
func Env(client *clientv3.Client, features func(*watch.Features)) storagetest.Env {
	return storagetest.Env{Client: client, NewStorage: NewStorage(client, features)}
}
