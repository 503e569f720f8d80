package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/listwatch/listwatch/check/etcd"
)

// rawStream is one gRPC watch stream, read by a goroutine of its own into ch; close stops it and
// waits for it.
type rawStream struct {
	stream pb.Watch_WatchClient
	cancel context.CancelFunc
	ch     chan *pb.WatchResponse
	wg     sync.WaitGroup
}

func (p *prober) openStream() (*rawStream, error) {
	ctx, cancel := context.WithCancel(p.ctx)
	st, err := p.watch.Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	rs := &rawStream{stream: st, cancel: cancel, ch: make(chan *pb.WatchResponse, 256)}
	rs.wg.Go(func() {
		defer close(rs.ch)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			select {
			case rs.ch <- r:
			case <-ctx.Done():
				return
			}
		}
	})
	return rs, nil
}

func (rs *rawStream) close() {
	rs.cancel()
	rs.wg.Wait()
}

// next is the stream's next response, or nil when none comes within d or the stream ends.
func (p *prober) next(rs *rawStream, d time.Duration) *pb.WatchResponse {
	select {
	case r := <-rs.ch:
		return r
	case <-p.cfg.Clock.After(d):
		return nil
	}
}

// create sends a create request and returns the answer to it, nil if none comes.
func (p *prober) create(rs *rawStream, req *pb.WatchCreateRequest) (*pb.WatchResponse, error) {
	if err := rs.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
		return nil, err
	}
	r := p.next(rs, p.cfg.Timeout)
	if r == nil {
		return nil, fmt.Errorf("no answer to the watch request within %v", p.cfg.Timeout)
	}
	return r, nil
}

// events reads the stream until it has n events or none comes within the timeout.
func (p *prober) events(rs *rawStream, n int) []*mvccpb.Event {
	var evs []*mvccpb.Event
	for len(evs) < n {
		r := p.next(rs, p.cfg.Timeout)
		if r == nil {
			break
		}
		evs = append(evs, r.Events...)
	}
	return evs
}

// createOK creates a watch and records f refused unless it was created and not canceled.
func (p *prober) createOK(f Feature, rs *rawStream, req *pb.WatchCreateRequest) bool {
	r, err := p.create(rs, req)
	switch {
	case p.refused(f, err):
		return false
	case !r.Created || r.Canceled:
		reason := r.CancelReason
		if reason == "" {
			reason = "canceled"
		}
		p.set(f, Refused, "%s", reason)
		return false
	}
	return true
}

func (p *prober) probeWatches(ra int64) {
	end := []byte(etcd.PrefixEnd(etcd.Bytes(p.cfg.Prefix)))
	p.withStream(FeatWatchFromPast, func(rs *rawStream) {
		if !p.createOK(FeatWatchFromPast, rs, &pb.WatchCreateRequest{Key: p.key(""), RangeEnd: end, StartRevision: ra}) {
			return
		}
		evs := p.events(rs, 1)
		if len(evs) == 0 || evs[0].Kv.ModRevision != ra || string(evs[0].Kv.Value) != "1" {
			p.set(FeatWatchFromPast, Differs, "a watch from revision %d did not begin with the put made there: %v", ra, evs)
			return
		}
		p.ok(FeatWatchFromPast)
	})
	p.withStream(FeatWatchFilters, func(rs *rawStream) {
		if !p.createOK(FeatWatchFilters, rs, &pb.WatchCreateRequest{Key: p.key("f"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}}) {
			return
		}
		if _, err := p.put("f", "1"); err != nil {
			p.set(FeatWatchFilters, NotProbed, "put: %v", err)
			return
		}
		if err := p.del("f"); err != nil {
			p.set(FeatWatchFilters, NotProbed, "delete: %v", err)
			return
		}
		evs := p.events(rs, 1)
		switch {
		case len(evs) == 0:
			p.set(FeatWatchFilters, Differs, "a watch with the NOPUT filter did not get the DELETE")
		case evs[0].Type == mvccpb.PUT:
			p.set(FeatWatchFilters, Differs, "a watch with the NOPUT filter got a PUT: filters ignored")
		default:
			p.ok(FeatWatchFilters)
		}
	})
	p.withStream(FeatFragment, func(rs *rawStream) {
		if !p.createOK(FeatFragment, rs, &pb.WatchCreateRequest{Key: p.key("g"), Fragment: true}) {
			return
		}
		if _, err := p.put("g", "1"); err != nil {
			return
		}
		if evs := p.events(rs, 1); len(evs) != 1 {
			p.set(FeatFragment, Differs, "a watch with fragment did not get the put")
			return
		}
		p.ok(FeatFragment)
	})
	p.withStream(FeatProgressNotify, func(rs *rawStream) {
		if p.createOK(FeatProgressNotify, rs, &pb.WatchCreateRequest{Key: p.key("h"), ProgressNotify: true}) {
			p.ok(FeatProgressNotify)
		}
	})
	p.withStream(FeatRequestProgress, func(rs *rawStream) {
		if !p.createOK(FeatRequestProgress, rs, &pb.WatchCreateRequest{Key: p.key("q")}) {
			return
		}
		if err := rs.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); p.refused(FeatRequestProgress, err) {
			return
		}
		r := p.next(rs, p.cfg.Timeout)
		switch {
		case r == nil:
			p.set(FeatRequestProgress, Refused, "not answered within %v (a synced watch of a quiet key, which etcd answers at once)", p.cfg.Timeout)
		case len(r.Events) > 0 || r.Created || r.Canceled:
			p.set(FeatRequestProgress, Differs, "answered with %v", r)
		case r.Header.GetRevision() < p.rev:
			p.set(FeatRequestProgress, Differs, "answered at revision %d, below the store's %d", r.Header.GetRevision(), p.rev)
		default:
			p.ok(FeatRequestProgress)
		}
	})
	p.withStream(FeatClientWatchID, func(rs *rawStream) {
		r, err := p.create(rs, &pb.WatchCreateRequest{Key: p.key("i"), WatchId: 7})
		switch {
		case p.refused(FeatClientWatchID, err):
		case !r.Created || r.Canceled:
			p.set(FeatClientWatchID, Refused, "%s", r.CancelReason)
		case r.WatchId != 7:
			p.set(FeatClientWatchID, Differs, "the watch asked for ID 7 got ID %d", r.WatchId)
		default:
			p.ok(FeatClientWatchID)
		}
	})
}

// withStream runs probe on a new watch stream, closed afterwards, unless the run skips f.
func (p *prober) withStream(f Feature, probe func(rs *rawStream)) {
	if p.cfg.Skip.Has(f) {
		return
	}
	rs, err := p.openStream()
	if p.refused(f, err) {
		return
	}
	defer rs.close()
	probe(rs)
}
