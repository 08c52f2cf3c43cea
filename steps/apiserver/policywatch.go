package apiserver

import (
	"context"
	"sync/atomic"
	"time"
)

// policyWatch keeps the cached RBAC policy current on etcd without reading
// anything per request: kube-apiserver's RBAC authorizer decides from an
// informer's cache, fed by a watch of the four RBAC resources, and so does
// podlab's on etcd. Each event moves gen; a policy decoded at gen g is
// current while gen is still g. While the watches are not running (at
// start, after etcd went away, after a compaction) ok is false and
// policyIn takes the fingerprint of the RBAC keys in each transaction, as
// on bbolt. As with an informer, a change reaches the cache a moment after
// it is stored.
type policyWatch struct {
	gen atomic.Int64
	ok  atomic.Bool
}

// watchPolicy runs the watches until ctx ends, starting them again (from
// the current revision) when they fail.
func (s *Server) watchPolicy(ctx context.Context) {
	for ctx.Err() == nil {
		s.watchPolicyOnce(ctx)
		s.pw.ok.Store(false)
		s.pw.gen.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Server) watchPolicyOnce(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rev, err := s.store.Revision(wctx)
	if err != nil {
		return
	}
	changed := make(chan struct{}, 1)
	ended := make(chan struct{}, len(rbacResources))
	for _, name := range rbacResources {
		r, _ := LookupResource(name)
		w, err := s.store.Watch(wctx, r.Prefix(""), rev)
		if err != nil {
			return
		}
		go func() {
			for range w.Events() {
				s.pw.gen.Add(1)
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			ended <- struct{}{}
		}()
	}
	s.pw.gen.Add(1) // what was decoded before the watches ran is not known current
	s.pw.ok.Store(true)
	select {
	case <-ctx.Done():
	case <-ended:
	}
}
