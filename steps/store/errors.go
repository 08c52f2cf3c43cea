package store

import "errors"

// These errors come from a transaction's reads and writes (Tx). Callers act
// on them: the API server turns each into a Kubernetes status (404 NotFound,
// 409 AlreadyExists, 409 Conflict, 400 BadRequest).
var (
	// ErrNotFound is returned when a key that must exist (Put, Delete) does
	// not.
	ErrNotFound = errors.New("key not found")

	// ErrExists is returned by Create when the key already exists.
	ErrExists = errors.New("key already exists")

	// ErrConflict is returned by Put and Delete when the key's mod_revision
	// is not the one the caller expected: someone else wrote it since the
	// caller read it. Read it again and retry (optimistic concurrency, the
	// resourceVersion check of a Kubernetes update).
	ErrConflict = errors.New("key was modified: mod_revision is not the expected one")

	// ErrReadOnly is returned when a write is attempted in a View.
	ErrReadOnly = errors.New("write in a read-only transaction")

	// ErrBadKey is returned for an empty key, a key (or prefix) that does not
	// start with "/", or a nil value.
	ErrBadKey = errors.New(`bad key or value: keys start with "/" and are not empty; values are not nil`)

	// ErrBadRevision is returned for a negative revision, or for compacting
	// to a revision the store has not reached yet.
	ErrBadRevision = errors.New("bad revision: revisions are >= 0 and not past the store's revision")
)

// These errors come from the store's history (Watch, Compact).
var (
	// ErrCompacted is returned by Watch, or by a running Watcher's Err, when
	// the events the watcher needs were removed by compaction. Kubernetes
	// answers the same with 410 Gone ("too old resource version").
	ErrCompacted = errors.New("required revision has been compacted: list again and watch from the list's revision")
)

// These errors come from opening the store's file.
var (
	// ErrBusy is returned when another process held the store's file for
	// longer than the lock timeout (WithLockTimeout, 10s by default).
	ErrBusy = errors.New("the store is busy: another process holds its file")

	// ErrClosed is returned by any operation on a Store after Close, and by
	// a Watcher's Err when its Store was closed under it.
	ErrClosed = errors.New("store is closed")

	// ErrLayout is returned by Open for a podlab store written in another
	// layout (by another version of podlab) than the one this package reads.
	ErrLayout = errors.New("the store's file has a layout this podlab does not read")
)
