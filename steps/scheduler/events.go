package scheduler

import (
	"context"
	"sync"

	"github.com/podlab/podlab/steps/apiserver"
)

// eventWriter writes Events in a goroutine of its own, in order, as
// client-go's event broadcaster does for kube-scheduler: recording an event
// never holds up a scheduling cycle or a binding. (The broadcaster drops
// events when 1,000 wait; this queue keeps them all.)
type eventWriter struct {
	rec  *apiserver.Recorder
	warn func(error)

	mu      sync.Mutex
	queue   []pendingEvent
	closing bool
	wake    chan struct{}
	stopped chan struct{}
}

type pendingEvent struct {
	obj                        apiserver.Object
	eventType, reason, message string
}

func newEventWriter(rec *apiserver.Recorder, warn func(error)) *eventWriter {
	return &eventWriter{rec: rec, warn: warn, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// add queues an event about obj.
func (e *eventWriter) add(obj apiserver.Object, eventType, reason, message string) {
	e.mu.Lock()
	e.queue = append(e.queue, pendingEvent{obj, eventType, reason, message})
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// run writes queued events until close, and then the ones left.
func (e *eventWriter) run(ctx context.Context) {
	defer close(e.stopped)
	for {
		e.mu.Lock()
		batch, closing := e.queue, e.closing
		e.queue = nil
		e.mu.Unlock()
		for _, ev := range batch {
			if err := e.rec.Event(ctx, ev.obj, ev.eventType, ev.reason, ev.message); err != nil && e.warn != nil {
				e.warn(err)
			}
		}
		if len(batch) == 0 {
			if closing {
				return
			}
			<-e.wake
		}
	}
}

// close waits for the queued events to be written and stops run.
func (e *eventWriter) close() {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	<-e.stopped
}
