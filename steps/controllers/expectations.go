package controllers

import (
	"sync"
	"time"
)

// expectationsTTL is how long the ReplicaSet controller waits to see the
// pods it created or deleted before it trusts its cache again anyway
// (controller.ExpectationsTimeout).
const expectationsTTL = 5 * time.Minute

// expectations are the ReplicaSet controller's memory of what it just did
// (controller.UIDTrackingControllerExpectations). Its cache of pods lags
// behind the API server: right after creating 3 pods, the next sync may
// still see none and would create 3 more. So before creating n pods the
// controller expects n creations, and each pod that arrives through the
// watch counts one off; the ReplicaSet is not managed again until all were
// seen (or the expectations are 5 minutes old). Deletions are tracked by
// pod key, because a pod deleted gracefully is seen twice: once with its
// deletionTimestamp, once gone.
type expectations struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*expectation
}

type expectation struct {
	adds     int
	deleting map[string]bool // pod keys
	at       time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, m: map[string]*expectation{}}
}

// Satisfied reports whether the ReplicaSet rsKey may be managed: nothing
// is expected, everything expected was seen, or the expectations expired.
func (e *expectations) Satisfied(rsKey string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[rsKey]
	if x == nil {
		return true
	}
	if x.adds <= 0 && len(x.deleting) == 0 {
		return true
	}
	return e.now().Sub(x.at) > expectationsTTL
}

// ExpectCreations records that n pods are about to be created.
func (e *expectations) ExpectCreations(rsKey string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[rsKey] = &expectation{adds: n, deleting: map[string]bool{}, at: e.now()}
}

// ExpectDeletions records that these pods are about to be deleted.
func (e *expectations) ExpectDeletions(rsKey string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expectation{deleting: map[string]bool{}, at: e.now()}
	for _, k := range podKeys {
		x.deleting[k] = true
	}
	e.m[rsKey] = x
}

// CreationObserved counts one expected pod as seen (or as never coming,
// when its create failed).
func (e *expectations) CreationObserved(rsKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[rsKey]; x != nil {
		x.adds--
	}
}

// DeletionObserved counts the deletion of podKey as seen, once.
func (e *expectations) DeletionObserved(rsKey, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[rsKey]; x != nil {
		delete(x.deleting, podKey)
	}
}

// Delete forgets a ReplicaSet's expectations (it was deleted).
func (e *expectations) Delete(rsKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, rsKey)
}
