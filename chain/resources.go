package chain

import (
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watch"
)

// StorageConfig returns the configuration of r's etcd3 storage: its key prefix, its GroupResource for
// errors, its NewObject for bookmarks and its codec (a CRD version's converts between the version
// served and the version stored). Callers may add a clock or logger. The chain builds its
// storages with it, as the apiserver's generic registry builds a resource's storage from its
// RESTOptions; httpwatch, which serves them, builds none.
func StorageConfig(r httpwatch.Resource) watch.Config {
	return watch.Config{ResourcePrefix: r.ResourcePrefix(), GroupResource: r.GroupResource(), NewFunc: r.NewObject, Codec: r.StorageCodec()}
}

// CacheConfig returns the configuration of a watch cache of r over s: its key prefix and key
// function, GetAttrs, NewObject for bookmarks, the list kind and the trigger index (pods by
// spec.nodeName, as the kube-apiserver's pod storage sets NodeNameTriggerFunc).
func CacheConfig(r httpwatch.Resource, s storage.Interface) cache.Config {
	cfg := cache.Config{
		Storage:        s,
		ResourcePrefix: r.ResourcePrefix() + "/",
		GroupResource:  r.GroupResource(),
		KeyFunc:        r.KeyFunc,
		GetAttrsFunc:   r.GetAttrs,
		NewFunc:        r.NewObject,
		NewListFunc:    r.NewListObject,
		Kind:           r.GroupVersionKind(),
	}
	if r.TriggerField != "" {
		cfg.IndexerFuncs = map[string]cache.IndexerFunc{r.TriggerField: r.TriggerValue}
	}
	return cfg
}
