package etcd_test

import (
	"fmt"
	"time"

	"github.com/listwatch/listwatch/check/etcd"
)

// A client puts a key and reads it back while another watches it: the history is linearizable and
// the watch received what it was owed.
func ExampleCheck() {
	h := &etcd.History{
		Operations: []etcd.Operation{
			{Client: 0, Call: 10, Return: 20,
				Request:  etcd.Request{Put: &etcd.PutRequest{Key: "a", Value: "1"}},
				Response: &etcd.Response{Revision: 2}},
			{Client: 0, Call: 30, Return: 40,
				Request: etcd.Request{Range: &etcd.RangeRequest{Key: "a"}},
				Response: &etcd.Response{Revision: 2, Range: &etcd.RangeResponse{Count: 1, Kvs: []etcd.KeyValue{
					{Key: "a", Value: "1", CreateRevision: 2, ModRevision: 2, Version: 1}}}}},
		},
		Watches: []etcd.Watch{{Client: 1, Call: 1,
			Request: etcd.WatchRequest{Key: "a", PrevKV: true},
			Responses: []etcd.WatchResponse{
				{Time: 2, Revision: 1, Created: true},
				{Time: 25, Revision: 2, Events: []etcd.Event{{Type: etcd.Put,
					Kv: etcd.KeyValue{Key: "a", Value: "1", CreateRevision: 2, ModRevision: 2, Version: 1}}}},
			}}},
	}
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println("invalid:", err)
		return
	}
	fmt.Println(res.Verdict, res.OK())
	fmt.Println("linearization:", res.Linearization)
	for _, ev := range res.Events {
		fmt.Printf("reference event: %s %s=%s at %d\n", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
	}
	// Output:
	// linearizable true
	// linearization: [0 1]
	// reference event: PUT a=1 at 2
}

// The same history, but the watch received the value of a put that never happened: the check names
// the guarantee broken, the watch and its response.
func ExampleCheck_violation() {
	h := &etcd.History{
		Operations: []etcd.Operation{
			{Client: 0, Call: 10, Return: 20,
				Request:  etcd.Request{Put: &etcd.PutRequest{Key: "a", Value: "1"}},
				Response: &etcd.Response{Revision: 2}},
		},
		Watches: []etcd.Watch{{Client: 1, Call: 1,
			Request: etcd.WatchRequest{Key: "a"},
			Responses: []etcd.WatchResponse{
				{Time: 2, Revision: 1, Created: true},
				{Time: 25, Revision: 2, Events: []etcd.Event{{Type: etcd.Put,
					Kv: etcd.KeyValue{Key: "a", Value: "2", CreateRevision: 2, ModRevision: 2, Version: 1}}}},
			}}},
	}
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println("invalid:", err)
		return
	}
	fmt.Println(res.Verdict, res.OK())
	for _, v := range res.Violations {
		fmt.Printf("%s: watch %d response %d at revision %d\n", v.Guarantee, v.Watch, v.Response, v.Revision)
	}
	// Output:
	// linearizable false
	// reliable: watch 0 response 1 at revision 2
}
