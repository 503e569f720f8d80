package storage

import "context"

// Stats describes what a storage holds of one resource.
//
// Mirrors storage/interfaces.go Stats.
type Stats struct {
	// ObjectCount is the number of objects stored.
	ObjectCount int64
	// EstimatedAverageObjectSizeBytes is the average size of the stored (encoded and transformed)
	// values, 0 when no estimate is kept. An estimate: neither exact nor consistent with ObjectCount.
	EstimatedAverageObjectSizeBytes int64
}

// KeysFunc returns the keys of the objects a storage holds, as apiserver keys ("/pods/ns/name") or
// etcd keys ("/registry/pods/ns/name"): the etcd3 storage's size estimate keeps the sizes of these
// keys only.
//
// Mirrors storage/interfaces.go KeysFunc.
type KeysFunc func(context.Context) ([]string, error)
