package trace

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

// watchLog is what a watch from the start replayed of one resource.
type watchLog struct {
	events []apiserver.WatchEvent
	// after: the log holds every write after this revision.
	after     int64
	compacted bool
}

// compactedAt is the revision the log was compacted at, 0 when it was not.
func (l *watchLog) compactedAt() int64 {
	if !l.compacted {
		return 0
	}
	return l.after
}

// logRequest asks for one resource's log.
type logRequest struct {
	resource, namespace string
	opts                apiserver.ListOptions
	// done, if set, says the log needs nothing after ev.
	done func(ev apiserver.WatchEvent, rev int64) bool
}

// readLogs reads several logs at once, each up to revision upTo.
func readLogs(ctx context.Context, c apiserver.Interface, o options, upTo int64, reqs ...logRequest) ([]*watchLog, error) {
	logs := make([]*watchLog, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { logs[i], errs[i] = readLog(ctx, c, r, upTo, o.idle) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return logs, nil
}

// readLog replays a resource's watch log from its start: a watch from
// revision 1, or from the compacted revision if the log was compacted. A
// watch does not end when it has replayed the log: it waits for the next
// write. So it stops at the first write at or after upTo (the store's
// revision when the trace began), when r.done says so, or after idle
// without a write.
func readLog(ctx context.Context, c apiserver.Interface, r logRequest, upTo int64, idle time.Duration) (*watchLog, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := &watchLog{after: 1}
	opts := r.opts
	opts.ResourceVersion = "1"
	err := readableAt(ctx, c, r, 1)
	if err == nil {
		var w apiserver.Watcher
		if w, err = c.Watch(wctx, r.resource, r.namespace, opts); err == nil {
			return follow(ctx, log, w, r, upTo, idle)
		}
	}
	if apierrors.IsResourceExpired(err) {
		if log.after, err = oldestWatchable(ctx, c, r, upTo); err != nil {
			return nil, err
		}
		log.compacted = true
		opts.ResourceVersion = strconv.FormatInt(log.after, 10)
		var w apiserver.Watcher
		if w, err = c.Watch(wctx, r.resource, r.namespace, opts); err == nil {
			return follow(ctx, log, w, r, upTo, idle)
		}
	}
	return nil, fmt.Errorf("watching %s from the start of the log: %w", r.resource, forbiddenHint(err))
}

// follow reads w until upTo, r.done or idle (see readLog).
func follow(ctx context.Context, log *watchLog, w apiserver.Watcher, r logRequest, upTo int64, idle time.Duration) (*watchLog, error) {
	if upTo <= log.after {
		return log, nil // nothing was written since
	}
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				if err := w.Err(); err != nil {
					return nil, fmt.Errorf("reading the watch log of %s: %w", r.resource, err)
				}
				return nil, fmt.Errorf("reading the watch log of %s: %w", r.resource, ctx.Err())
			}
			rev, err := revisionOf(ev.Object.GetResourceVersion())
			if err != nil {
				return nil, err
			}
			log.events = append(log.events, ev)
			if rev >= upTo || (r.done != nil && r.done(ev, rev)) {
				return log, nil
			}
			timer.Reset(idle)
		case <-timer.C:
			return log, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("reading the watch log of %s: %w", r.resource, ctx.Err())
		}
	}
}

// readableAt asks whether the store still holds revision rev of r's
// resource: a list read exactly at rev (resourceVersionMatch=Exact) is
// 410 Gone when the log was compacted past it, as a watch from rev would
// be. A list answers at once, where a watch over HTTP answers 410 only as
// the first event of a stream that, when it is not compacted, waits.
func readableAt(ctx context.Context, c apiserver.Interface, r logRequest, rev int64) error {
	opts := r.opts
	opts.ResourceVersion = strconv.FormatInt(rev, 10)
	opts.ResourceVersionMatch = string(metav1.ResourceVersionMatchExact)
	_, err := c.List(ctx, r.resource, r.namespace, opts)
	return err
}

// oldestWatchable finds the compacted revision: the lowest revision a
// watch may start after. The API server says only "too old resource
// version" (410 Gone), so it asks again (readableAt), halving the range
// each time.
func oldestWatchable(ctx context.Context, c apiserver.Interface, r logRequest, upTo int64) (int64, error) {
	lo, hi := int64(1), upTo // a watch after lo fails; after hi (now) works
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		err := readableAt(ctx, c, r, mid)
		switch {
		case err == nil:
			hi = mid
		case apierrors.IsResourceExpired(err):
			lo = mid
		default:
			return 0, fmt.Errorf("finding where the compacted watch log of %s starts: %w", r.resource, err)
		}
	}
	return hi, nil
}
