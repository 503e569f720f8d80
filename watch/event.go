package watch

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// event is one raw change on its way from etcd to the decoder.
type event struct {
	key              string
	value            []byte
	prevValue        []byte
	rev              int64
	isDeleted        bool
	isCreated        bool
	isProgressNotify bool
	// isInitialEventsEndBookmark marks the bookmark that ends the initial events; carrying it on the
	// event keeps the producer and the decoder from sharing state.
	isInitialEventsEndBookmark bool
}

// parseKV turns a KeyValue of the initial list into a synthetic create.
//
// Mirrors etcd3/event.go parseKV.
func parseKV(kv *mvccpb.KeyValue) *event {
	return &event{
		key:       string(kv.Key),
		value:     kv.Value,
		rev:       kv.ModRevision,
		isCreated: true,
	}
}

// parseEvent turns an etcd watch event into an event. Anything but a create needs the previous value
// (for DELETED objects and filter transitions); its absence, for example because the previous revision
// was compacted away, is an error.
//
// Mirrors etcd3/event.go parseEvent.
func parseEvent(e *clientv3.Event) (*event, error) {
	if !e.IsCreate() && e.PrevKv == nil {
		return nil, fmt.Errorf("etcd event received with PrevKv=nil (key=%q, modRevision=%d, type=%s)", string(e.Kv.Key), e.Kv.ModRevision, e.Type.String())
	}
	ret := &event{
		key:       string(e.Kv.Key),
		value:     e.Kv.Value,
		rev:       e.Kv.ModRevision,
		isDeleted: e.Type == clientv3.EventTypeDelete,
		isCreated: e.IsCreate(),
	}
	if e.PrevKv != nil {
		ret.prevValue = e.PrevKv.Value
	}
	return ret, nil
}

// progressNotifyEvent mirrors etcd3/event.go progressNotifyEvent.
func progressNotifyEvent(rev int64) *event {
	return &event{rev: rev, isProgressNotify: true}
}
