package etcdgrpc

import "context"

// WithBeforeRangeStreamChunk returns o with f run inside the RangeStream handler before each chunk
// is read, with the stream's context and the chunk's number from 0. The tests use it where etcd's
// use the beforeRangeStreamChunk failpoint: to write, compact or cancel between two chunks.
func WithBeforeRangeStreamChunk(o Options, f func(ctx context.Context, chunk int)) Options {
	o.hooks = &testHooks{beforeRangeStreamChunk: f}
	return o
}
