package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/listwatch/listwatch/storage"

	clientv3 "go.etcd.io/etcd/client/v3"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

const (
	// incomingBufSize and outgoingBufSize bound the raw and the decoded events of one watch; when both
	// are full the watch stops reading from etcd.
	incomingBufSize         = 100
	outgoingBufSize         = 100
	processEventConcurrency = 10

	watchChanLogWarningInterval  = 5 * time.Second
	watchChanLogWarningThreshold = 100 * time.Millisecond
)

// watcher turns etcd watches into apimachinery watches for one resource.
type watcher struct {
	client              *clientv3.Client
	codec               storage.Codec
	newFunc             func() runtime.Object
	objectType          string
	groupResource       schema.GroupResource
	versioner           storage.Versioner
	transformer         storage.Transformer
	getCurrentStorageRV func(context.Context) (uint64, error)
	features            Features
	rangeStream         *rangeStreamSupport
	clock               clock.PassiveClock
	logger              *slog.Logger
	// sizeEstimator returns the Store's size estimate, nil while none is kept.
	sizeEstimator func() *resourceSizeEstimator
	// listPageSize is the page size of the initial list; tests lower it to exercise paging.
	listPageSize int64
}

// watchChan is one watch: it implements apiwatch.Interface.
type watchChan struct {
	watcher           *watcher
	key               string
	initialRev        int64
	recursive         bool
	progressNotify    bool
	internalPred      storage.Predicate
	ctx               context.Context
	cancel            context.CancelFunc
	incomingEventChan chan *event
	resultChan        chan apiwatch.Event

	incomingEventLogger *blockLogger
	resultLogger        *blockLogger

	// sendMu orders the two senders of resultChan (the event processor and an error from the etcd
	// side) so that nothing follows an ERROR; upstream leaves that window open (a TODO in sendError).
	sendMu    sync.Mutex
	errorSent bool
}

// Watch starts a watch on the prepared etcd key from revision rev (0: see getStartWatchResourceVersion).
// Only argument errors are returned; everything else arrives as events.
//
// Mirrors etcd3/watcher.go watcher.Watch.
func (w *watcher) Watch(ctx context.Context, key string, rev int64, opts storage.ListOptions) (apiwatch.Interface, error) {
	if opts.Recursive && !strings.HasSuffix(key, "/") {
		return nil, storage.ErrRecursiveKey
	}
	if opts.ProgressNotify && w.newFunc == nil {
		return nil, apierrors.NewInternalError(errors.New("progressNotify for watch is unsupported by the etcd storage because no newFunc was provided"))
	}
	endBookmark := w.isInitialEventsEndBookmarkRequired(opts)
	if endBookmark && w.newFunc == nil {
		// Upstream would dereference the nil newFunc when building the bookmark.
		return nil, apierrors.NewInternalError(errors.New("the initial-events-end bookmark is unsupported by the etcd storage because no newFunc was provided"))
	}
	startWatchRV, err := w.getStartWatchResourceVersion(ctx, rev, opts)
	if err != nil {
		return nil, err
	}
	wc := w.createWatchChan(ctx, key, startWatchRV, opts.Recursive, opts.ProgressNotify, opts.Predicate)
	go wc.run(endBookmark, w.areInitialEventsRequired(rev, opts))
	// An etcd watch cannot tell when it has caught up, so it is initialized as soon as it starts.
	storage.WatchInitialized(ctx)
	return wc, nil
}

func (w *watcher) createWatchChan(ctx context.Context, key string, rev int64, recursive, progressNotify bool, pred storage.Predicate) *watchChan {
	wc := &watchChan{
		watcher:           w,
		key:               key,
		initialRev:        rev,
		recursive:         recursive,
		progressNotify:    progressNotify,
		internalPred:      pred,
		incomingEventChan: make(chan *event, incomingBufSize),
		resultChan:        make(chan apiwatch.Event, outgoingBufSize),
	}
	if pred.Empty() {
		wc.internalPred = storage.Everything
	}
	wc.ctx, wc.cancel = context.WithCancel(ctx)
	wc.incomingEventLogger = newBlockLogger(watchChanLogWarningInterval, watchChanLogWarningThreshold,
		"Fast watcher, slow processing. Probably caused by slow decoding, user not receiving fast, or other processing logic",
		w.objectType, w.groupResource, w.clock, w.logger)
	wc.resultLogger = newBlockLogger(watchChanLogWarningInterval, watchChanLogWarningThreshold,
		"Fast watcher, slow processing. Probably caused by slow dispatching events to watchers",
		w.objectType, w.groupResource, w.clock, w.logger)
	return wc
}

// getStartWatchResourceVersion returns the revision the watch starts after: rev itself when set;
// otherwise 0 (list first) unless the client asked for no initial events, which starts at etcd's
// current revision.
//
// Mirrors etcd3/watcher.go getStartWatchResourceVersion.
func (w *watcher) getStartWatchResourceVersion(ctx context.Context, rev int64, opts storage.ListOptions) (int64, error) {
	if rev > 0 {
		return rev, nil
	}
	if w.features.DisableWatchList {
		return 0, nil
	}
	if opts.SendInitialEvents == nil || *opts.SendInitialEvents {
		return 0, nil
	}
	cur, err := w.getCurrentStorageRV(ctx)
	if err != nil {
		return 0, err
	}
	return int64(cur), nil
}

// isInitialEventsEndBookmarkRequired mirrors etcd3/watcher.go isInitialEventsEndBookmarkRequired.
func (w *watcher) isInitialEventsEndBookmarkRequired(opts storage.ListOptions) bool {
	if w.features.DisableWatchList {
		return false
	}
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.Predicate.AllowWatchBookmarks
}

// areInitialEventsRequired mirrors etcd3/watcher.go areInitialEventsRequired.
func (w *watcher) areInitialEventsRequired(rev int64, opts storage.ListOptions) bool {
	if opts.SendInitialEvents == nil && rev == 0 {
		return true // legacy
	}
	if w.features.DisableWatchList {
		return false
	}
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents
}

type etcdError interface {
	Code() grpccodes.Code
	Error() string
}

type grpcError interface {
	GRPCStatus() *grpcstatus.Status
}

// isCancelError mirrors etcd3/watcher.go isCancelError.
func isCancelError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return true
	}
	if e, ok := err.(etcdError); ok && e.Code() == grpccodes.Canceled {
		return true
	}
	if e, ok := err.(grpcError); ok && e.GRPCStatus().Code() == grpccodes.Canceled {
		return true
	}
	return false
}

// run owns the watch's goroutines: it waits until the etcd side ends or the watch is cancelled, then
// cancels everything, waits for every sender to exit and only then closes resultChan.
//
// Mirrors etcd3/watcher.go watchChan.run.
func (wc *watchChan) run(initialEventsEndBookmarkRequired, forceInitialEvents bool) {
	watchClosedCh := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wc.startWatching(watchClosedCh, initialEventsEndBookmarkRequired, forceInitialEvents)
	}()
	wc.processEvents(&wg)

	select {
	case <-watchClosedCh:
	case <-wc.ctx.Done():
	}
	wc.cancel()
	wg.Wait()
	close(wc.resultChan)
}

// Stop implements apiwatch.Interface: it cancels the watch; ResultChan closes once it has wound down.
func (wc *watchChan) Stop() { wc.cancel() }

// ResultChan implements apiwatch.Interface.
func (wc *watchChan) ResultChan() <-chan apiwatch.Event { return wc.resultChan }

// RequestWatchProgress asks etcd for a progress notification on this watch's stream.
func (wc *watchChan) RequestWatchProgress() error {
	return wc.watcher.client.RequestProgress(wc.ctx)
}

// sync lists the current state as synthetic creates and moves initialRev to the list's revision.
//
// Mirrors etcd3/watcher.go watchChan.sync.
func (wc *watchChan) sync() error {
	if wc.recursive && !wc.watcher.features.DisableEtcdRangeStream && wc.watcher.rangeStream.supported() {
		err := wc.syncStreamRecursive()
		if err == nil {
			return nil
		}
		if grpcstatus.Code(err) != grpccodes.Unimplemented {
			return err
		}
		wc.watcher.rangeStream.markUnsupported()
	}
	return wc.syncPaginated()
}

// syncPaginated mirrors etcd3/watcher.go syncPaginated: pages of listPageSize, the next page starting
// after the last key and pinned to the first page's revision.
func (wc *watchChan) syncPaginated() error {
	var opts []clientv3.OpOption
	if wc.recursive {
		limit := wc.watcher.listPageSize
		if limit <= 0 {
			limit = maxLimit
		}
		opts = append(opts, clientv3.WithLimit(limit), clientv3.WithRange(clientv3.GetPrefixRangeEnd(wc.key)))
	}
	var lastKey []byte
	var withRev int64
	preparedKey := wc.key
	for {
		getResp, err := wc.watcher.client.KV.Get(wc.ctx, preparedKey, opts...)
		if err != nil {
			return interpretListError(err, true, preparedKey, wc.key)
		}
		if len(getResp.Kvs) == 0 && getResp.More {
			return errors.New("no results were found, but etcd indicated there were more values remaining")
		}
		for i, kv := range getResp.Kvs {
			lastKey = kv.Key
			wc.queueEvent(parseKV(kv))
			getResp.Kvs[i] = nil
		}
		if withRev == 0 {
			wc.initialRev = getResp.Header.Revision
		}
		if !getResp.More {
			return nil
		}
		preparedKey = string(lastKey) + "\x00"
		if withRev == 0 {
			withRev = getResp.Header.Revision
			opts = append(opts, clientv3.WithRev(withRev))
		}
	}
}

// syncStreamRecursive mirrors etcd3/watcher.go syncStreamRecursive: the list as one RangeStream.
func (wc *watchChan) syncStreamRecursive() error {
	stream, err := wc.watcher.client.KV.GetStream(wc.ctx, wc.key, clientv3.WithRange(clientv3.GetPrefixRangeEnd(wc.key)))
	if err != nil {
		return err
	}
	defer drain(stream)
	var initialRev int64
	for r := range stream {
		if err := r.Err(); err != nil {
			// A compaction mid-stream cannot be resumed: the client must relist.
			return interpretListError(err, false, wc.key, wc.key)
		}
		rr := r.RangeResponse
		for i, kv := range rr.Kvs {
			wc.queueEvent(parseKV(kv))
			rr.Kvs[i] = nil
		}
		if initialRev == 0 && rr.Header != nil {
			initialRev = rr.Header.Revision
		}
	}
	if initialRev == 0 {
		return fmt.Errorf("rangeStream for %q completed without a revision", wc.key)
	}
	wc.initialRev = initialRev
	return nil
}

func (wc *watchChan) logWatchChannelErr(err error) {
	switch {
	case strings.Contains(err.Error(), "mvcc: required revision has been compacted"):
		wc.watcher.logger.Warn("watch chan error", "err", err)
	case isCancelError(err):
	default:
		wc.watcher.logger.Error("watch chan error", "err", err)
	}
}

// startWatching lists first when initial events are required, queues the end bookmark if asked, then
// feeds the etcd watch from initialRev+1 into incomingEventChan. It closes watchClosedCh only when the
// etcd channel closes by itself; on an error it sends the ERROR (which cancels the watch) and returns.
//
// Mirrors etcd3/watcher.go startWatching.
func (wc *watchChan) startWatching(watchClosedCh chan struct{}, initialEventsEndBookmarkRequired, forceInitialEvents bool) {
	if wc.initialRev > 0 && forceInitialEvents {
		cur, err := wc.watcher.getCurrentStorageRV(wc.ctx)
		if err != nil {
			wc.sendError(err)
			return
		}
		if uint64(wc.initialRev) > cur {
			wc.sendError(storage.NewTooLargeResourceVersionError(uint64(wc.initialRev), cur, retryAfterSeconds()))
			return
		}
	}
	if forceInitialEvents {
		if err := wc.sync(); err != nil {
			wc.watcher.logger.Error("failed to sync with latest state", "err", err)
			wc.sendError(err)
			return
		}
	}
	if initialEventsEndBookmarkRequired {
		e := progressNotifyEvent(wc.initialRev)
		e.isInitialEventsEndBookmark = true
		wc.queueEvent(e)
	}
	opts := []clientv3.OpOption{clientv3.WithRev(wc.initialRev + 1), clientv3.WithPrevKV()}
	if wc.recursive {
		opts = append(opts, clientv3.WithPrefix())
	}
	if wc.progressNotify {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	wch := wc.watcher.client.Watch(wc.ctx, wc.key, opts...)
	var estimator *resourceSizeEstimator
	if wc.watcher.sizeEstimator != nil {
		estimator = wc.watcher.sizeEstimator()
	}
	for wres := range wch {
		if err := wres.Err(); err != nil {
			wc.logWatchChannelErr(err)
			// Returning here keeps events newer than the error from being queued.
			wc.sendError(err)
			drainWatch(wch)
			return
		}
		if wres.IsProgressNotify() {
			wc.queueEvent(progressNotifyEvent(wres.Header.GetRevision()))
			continue
		}
		for _, e := range wres.Events {
			if estimator != nil {
				switch e.Type {
				case clientv3.EventTypePut:
					estimator.updateKey(e.Kv)
				case clientv3.EventTypeDelete:
					estimator.deleteKey(e.Kv)
				}
			}
			parsed, err := parseEvent(e)
			if err != nil {
				wc.logWatchChannelErr(err)
				wc.sendError(err)
				drainWatch(wch)
				return
			}
			wc.queueEvent(parsed)
		}
	}
	// Only the client side ends an etcd watch channel without an error (cancel, client closed); the
	// processor may still be waiting, so tell run.
	close(watchClosedCh)
}

// drainWatch waits for clientv3 to close a watch channel after the watch was cancelled, so that no
// client goroutine is left blocked on it.
func drainWatch(wch clientv3.WatchChan) {
	for range wch {
	}
}

// retryAfterSeconds is the Retry-After of a too-large resourceVersion: 1s jittered by up to 3x.
func retryAfterSeconds() int {
	return int((time.Second + time.Duration(rand.Float64()*float64(3*time.Second))).Seconds())
}

// processEvents starts the goroutines that decode incoming events and send them on resultChan.
//
// Mirrors etcd3/watcher.go processEvents.
func (wc *watchChan) processEvents(wg *sync.WaitGroup) {
	if wc.watcher.features.DisableConcurrentWatchObjectDecode {
		wg.Add(1)
		go wc.serialProcessEvents(wg)
		return
	}
	wc.concurrentProcessEvents(wg)
}

func (wc *watchChan) serialProcessEvents(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case e := <-wc.incomingEventChan:
			res, err := wc.transform(e)
			if err != nil {
				wc.sendError(err)
				return
			}
			if res == nil {
				continue
			}
			if !wc.sendEvent(res) {
				return
			}
		case <-wc.ctx.Done():
			return
		}
	}
}

// concurrentProcessEvents decodes up to processEventConcurrency events at once and still emits them in
// order: a scheduler hands each event a result slot queued in arrival order, a collector drains the
// slots in that order.
//
// Mirrors etcd3/watcher.go concurrentProcessEvents.
func (wc *watchChan) concurrentProcessEvents(wg *sync.WaitGroup) {
	p := concurrentOrderedEventProcessing{
		wc:              wc,
		processingQueue: make(chan chan *processingResult, processEventConcurrency-1),
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.scheduleEventProcessing(wc.ctx, wg)
	}()
	go func() {
		defer wg.Done()
		p.collectEventProcessing(wc.ctx)
	}()
}

type processingResult struct {
	event *apiwatch.Event
	err   error
}

type concurrentOrderedEventProcessing struct {
	wc              *watchChan
	processingQueue chan chan *processingResult
}

func (p *concurrentOrderedEventProcessing) scheduleEventProcessing(ctx context.Context, wg *sync.WaitGroup) {
	for {
		var e *event
		select {
		case <-ctx.Done():
			return
		case e = <-p.wc.incomingEventChan:
		}
		slot := make(chan *processingResult, 1)
		select {
		case <-ctx.Done():
			return
		case p.processingQueue <- slot:
		}
		// The scheduler itself holds a count, so this Add never races with run's Wait at zero.
		wg.Add(1)
		go func(e *event, slot chan<- *processingResult) {
			defer wg.Done()
			res, err := p.wc.transform(e)
			slot <- &processingResult{event: res, err: err}
		}(e, slot)
	}
}

func (p *concurrentOrderedEventProcessing) collectEventProcessing(ctx context.Context) {
	for {
		var slot chan *processingResult
		select {
		case <-ctx.Done():
			return
		case slot = <-p.processingQueue:
		}
		var r *processingResult
		select {
		case <-ctx.Done():
			return
		case r = <-slot:
		}
		if r.err != nil {
			p.wc.sendError(r.err)
			return
		}
		if r.event == nil {
			continue
		}
		if !p.wc.sendEvent(r.event) {
			return
		}
	}
}

func (wc *watchChan) filter(obj runtime.Object) bool {
	if wc.internalPred.Empty() {
		return true
	}
	matched, err := wc.internalPred.Matches(obj)
	return err == nil && matched
}

func (wc *watchChan) acceptAll() bool { return wc.internalPred.Empty() }

// transform decodes an event and decides what, if anything, the client sees.
//
// Mirrors etcd3/watcher.go watchChan.transform.
func (wc *watchChan) transform(e *event) (*apiwatch.Event, error) {
	curObj, oldObj, err := wc.prepareObjs(e)
	if err != nil {
		wc.watcher.logger.Error("failed to prepare current and previous objects", "err", err)
		return nil, err
	}
	switch {
	case e.isProgressNotify:
		if wc.watcher.newFunc == nil {
			// Only a RequestWatchProgress broadcast reaches a watch without newFunc; upstream would
			// dereference nil here.
			return nil, nil
		}
		object := wc.watcher.newFunc()
		if err := wc.watcher.versioner.UpdateObject(object, uint64(e.rev)); err != nil {
			return nil, fmt.Errorf("failed to propagate object resource version: %w", err)
		}
		if e.isInitialEventsEndBookmark {
			if err := storage.AnnotateInitialEventsEndBookmark(object); err != nil {
				return nil, fmt.Errorf("error while accessing object's metadata gr: %v, type: %v, obj: %#v, err: %w", wc.watcher.groupResource, wc.watcher.objectType, object, err)
			}
		}
		return &apiwatch.Event{Type: apiwatch.Bookmark, Object: object}, nil
	case e.isDeleted:
		if !wc.filter(oldObj) {
			return nil, nil
		}
		return &apiwatch.Event{Type: apiwatch.Deleted, Object: oldObj}, nil
	case e.isCreated:
		if !wc.filter(curObj) {
			return nil, nil
		}
		return &apiwatch.Event{Type: apiwatch.Added, Object: curObj}, nil
	}
	if wc.acceptAll() {
		return &apiwatch.Event{Type: apiwatch.Modified, Object: curObj}, nil
	}
	curPasses, oldPasses := wc.filter(curObj), wc.filter(oldObj)
	switch {
	case curPasses && oldPasses:
		return &apiwatch.Event{Type: apiwatch.Modified, Object: curObj}, nil
	case curPasses:
		return &apiwatch.Event{Type: apiwatch.Added, Object: curObj}, nil
	case oldPasses:
		return &apiwatch.Event{Type: apiwatch.Deleted, Object: oldObj}, nil
	}
	return nil, nil
}

// transformErrorToEvent mirrors etcd3/watcher.go transformErrorToEvent: the ERROR carries a Status,
// InternalError for anything that is not already an API error.
func transformErrorToEvent(err error) apiwatch.Event {
	err = interpretWatchError(err)
	var as apierrors.APIStatus
	if !errors.As(err, &as) {
		as = apierrors.NewInternalError(err)
	}
	status := as.Status()
	return apiwatch.Event{Type: apiwatch.Error, Object: &status}
}

// sendError delivers the ERROR (unless err is a cancellation) and cancels the watch. It blocks until
// the client takes the event or gives up; after it nothing more is sent.
//
// Mirrors etcd3/watcher.go sendError.
func (wc *watchChan) sendError(err error) {
	defer wc.cancel()
	if isCancelError(err) {
		return
	}
	ev := transformErrorToEvent(err)
	wc.sendMu.Lock()
	defer wc.sendMu.Unlock()
	if wc.errorSent {
		return
	}
	wc.errorSent = true
	select {
	case wc.resultChan <- ev:
	case <-wc.ctx.Done():
	}
}

// sendEvent delivers ev, blocking while the client is not reading; it reports false once the watch is
// over.
//
// Mirrors etcd3/watcher.go sendEvent.
func (wc *watchChan) sendEvent(ev *apiwatch.Event) bool {
	start := wc.watcher.clock.Now()
	defer func() { wc.resultLogger.recordWait(wc.watcher.clock.Since(start)) }()
	wc.sendMu.Lock()
	defer wc.sendMu.Unlock()
	if wc.errorSent {
		return false
	}
	select {
	case wc.resultChan <- *ev:
		return true
	case <-wc.ctx.Done():
		return false
	}
}

// queueEvent hands a raw event to the processor, blocking (and so no longer reading from etcd) while
// the processor is behind.
//
// Mirrors etcd3/watcher.go queueEvent.
func (wc *watchChan) queueEvent(e *event) {
	start := wc.watcher.clock.Now()
	defer func() { wc.incomingEventLogger.recordWait(wc.watcher.clock.Since(start)) }()
	select {
	case wc.incomingEventChan <- e:
	case <-wc.ctx.Done():
	}
}

// prepareObjs decodes the current value (unless deleted) and the previous one when it matters: for a
// delete, or when the predicate filters. Both objects carry the event's revision.
//
// Mirrors etcd3/watcher.go prepareObjs.
func (wc *watchChan) prepareObjs(e *event) (curObj, oldObj runtime.Object, err error) {
	if e.isProgressNotify {
		return nil, nil, nil
	}
	if !e.isDeleted {
		data, _, err := wc.watcher.transformer.TransformFromStorage(wc.ctx, e.value, e.key)
		if err != nil {
			return nil, nil, err
		}
		if curObj, err = decodeObj(wc.watcher.codec, wc.watcher.versioner, data, e.rev); err != nil {
			return nil, nil, err
		}
	}
	if len(e.prevValue) > 0 && (e.isDeleted || !wc.acceptAll()) {
		data, _, err := wc.watcher.transformer.TransformFromStorage(wc.ctx, e.prevValue, e.key)
		if err != nil {
			return nil, nil, transformIfCorruptObjectError(e, err)
		}
		// The previous object is sent with the revision of this event: a DELETED object carries the
		// deletion revision.
		if oldObj, err = decodeObj(wc.watcher.codec, wc.watcher.versioner, data, e.rev); err != nil {
			return nil, nil, transformIfCorruptObjectError(e, err)
		}
	}
	return curObj, oldObj, nil
}

// transformIfCorruptObjectError mirrors etcd3/watcher.go transformIfCorruptObjectError.
func transformIfCorruptObjectError(e *event, err error) error {
	var coe *corruptObjectError
	if !e.isDeleted || !errors.As(err, &coe) {
		return err
	}
	return &corruptObjectDeletedError{err: coe}
}

// decodeObj mirrors etcd3/watcher.go decodeObj.
func decodeObj(codec storage.Codec, versioner storage.Versioner, data []byte, rev int64) (runtime.Object, error) {
	obj, err := codec.Decode(data, nil)
	if err != nil {
		return nil, err
	}
	if err := versioner.UpdateObject(obj, uint64(rev)); err != nil {
		return nil, fmt.Errorf("failure to version api object (%d) %#v: %v", rev, obj, err)
	}
	return obj, nil
}
