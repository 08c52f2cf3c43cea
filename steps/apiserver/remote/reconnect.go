package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Option changes how a Client behaves.
type Option func(*Client)

// WithReconnect makes the client what a long-running component needs
// when its API server goes away (a restart, an upgrade): a watch whose
// stream breaks and cannot be resumed at once tries again with back-off,
// 800ms doubling to 30s with jitter as client-go's reflector does, until
// the server answers or the watch's context ends, then resumes from the
// last resourceVersion it saw (or ends with 410 Expired, and the caller
// lists again). Other calls still fail at once with ErrUnreachable, as
// client-go's do: their callers retry as they always do (a requeue, the
// next heartbeat).
//
// notice, if not nil, is called with the error when the server stops
// answering and with nil when it answers again: once per change, not per
// failed call, so a component can say "waiting for the API server" once.
func WithReconnect(notice func(err error)) Option {
	return func(c *Client) {
		c.reconnect = true
		c.notice = notice
	}
}

// backoff is client-go's reflector's: 800ms, doubling, at most 30s, with
// up to as much again of jitter.
func backoff() wait.Backoff {
	return wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 1 << 30, Cap: 30 * time.Second}
}

// reachability tracks whether the API server answered the last call.
type reachability struct {
	mu   sync.Mutex
	lost bool
}

// observe records the outcome of a call: err nil or a status from the
// server means it answered; ErrUnreachable means it did not.
func (c *Client) observe(err error) {
	if c.notice == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	lost := errors.Is(err, ErrUnreachable)
	c.reach.mu.Lock()
	changed := c.reach.lost != lost
	c.reach.lost = lost
	c.reach.mu.Unlock()
	if changed {
		c.notice(err)
	}
}

// Ping asks the API server for /version and returns nil if it answers at
// all (even 401 or 403: something serves the API there), else an error
// wrapping ErrUnreachable that names the server.
func (c *Client) Ping(ctx context.Context) error {
	rc := c.clients[coreV1]
	err := rc.Get().AbsPath("/version").Do(ctx).Error()
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		err = nil
	}
	return c.wireError("asking for /version", err)
}

// WaitForServer returns once the API server answers Ping, trying again
// with the reflector's back-off while it does not; notice (of
// WithReconnect) hears that it is waiting, once. It returns ctx's error if
// ctx ends first, and at once any error that is not ErrUnreachable.
func (c *Client) WaitForServer(ctx context.Context) error {
	b := backoff()
	for {
		err := c.Ping(ctx)
		if err == nil || !errors.Is(err, ErrUnreachable) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the API server %s: %w", c.host, ctx.Err())
		case <-time.After(b.Step()):
		}
	}
}
