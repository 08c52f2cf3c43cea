package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/podlab/podlab/steps/statedir"
)

// Path is where podlab keeps the store under its state directory:
// <state-dir>/etcd/store.db.
func Path(stateDir string) string {
	return statedir.Layout{Dir: stateDir}.StoreFile()
}

// Defaults of the options.
const (
	DefaultHistory     = 10000
	DefaultLockTimeout = 10 * time.Second
	DefaultLingerIdle  = 2 * time.Millisecond
	DefaultLingerMax   = 25 * time.Millisecond
	// DefaultWatchPoll is how often a watcher looks at the file when no
	// inotify event came; without inotify it looks every 25ms.
	DefaultWatchPoll = 100 * time.Millisecond
)

type options struct {
	history     int
	historySet  bool // WithHistory was given (the etcd backend keeps all history otherwise)
	lockTimeout time.Duration
	waitNotice  func(waited time.Duration)
	lingerIdle  time.Duration
	lingerMax   time.Duration
	watchPoll   time.Duration
	noInotify   bool
	mustExist   bool
	bolt        func(*bolt.Options) // adjusts bbolt's options (benchmarks)
	noBatch     bool                // one commit per Update, no WAL (benchmarks)
	fsync       func(fd int) error  // stands in for fdatasync of the WAL (tests)
}

// Option configures Open.
type Option func(*options)

// WithHistory keeps at most n events in the history (default 10000).
// Writes compact the oldest revisions beyond that, a batch at a time.
//
// On etcd (OpenEtcd) the default is etcd's: the history stays until it is
// compacted (RunCompactor); WithHistory makes the store compact it after
// its writes instead, keeping about n revisions, as the bbolt file does.
func WithHistory(n int) Option { return func(o *options) { o.history, o.historySet = n, true } }

// WithLockTimeout bounds how long an operation waits for another process
// to release the file before failing with ErrBusy (default 10s).
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// WithWaitNotice calls fn once per operation that has waited for another
// process to release the file for a while (100ms), with the time waited; a
// command prints "waiting for the store: another podlab process holds it".
func WithWaitNotice(fn func(waited time.Duration)) Option {
	return func(o *options) { o.waitNotice = fn }
}

// WithLinger keeps the file open (and locked) for idle after each
// operation, so that back-to-back operations share one open, but for at
// most max in a row when another process waits for it. idle 0 opens and
// closes the file around every operation. Defaults: 2ms and 25ms.
func WithLinger(idle, max time.Duration) Option {
	return func(o *options) { o.lingerIdle, o.lingerMax = idle, max }
}

// WithWatchPoll sets how often watchers look at the file between inotify
// events (default 100ms), and whether to use inotify at all.
func WithWatchPoll(every time.Duration, inotify bool) Option {
	return func(o *options) { o.watchPoll, o.noInotify = every, !inotify }
}

// MustExist makes Open fail, with an error matching fs.ErrNotExist, when
// the file does not exist, instead of creating it.
func MustExist() Option { return func(o *options) { o.mustExist = true } }

// withBoltOptions lets fn adjust the options of every bbolt open, after the
// store's own: benchmarks compare bbolt's settings with it.
func withBoltOptions(fn func(*bolt.Options)) Option { return func(o *options) { o.bolt = fn } }

// withoutBatches commits every Update on its own, without the WAL, as the
// store did before it had one (BenchmarkPagesPerCommit counts the pages of
// one write's commit).
func withoutBatches() Option { return func(o *options) { o.noBatch = true } }

// withFsync makes fn stand in for the WAL's fdatasync: tests see what each
// fsync covers, as a power loss would.
func withFsync(fn func(fd int) error) Option { return func(o *options) { o.fsync = fn } }

// Store is etcd's role in podlab: one bbolt file of keys, and of the
// records of their revisions, which hold the values and are the history
// that watches read. It is safe for concurrent use, and several processes
// may open the same file: each operation opens the file, and the file is
// closed again a few milliseconds after the last one.
type Store struct {
	path string
	opts options

	mu       sync.Mutex // serializes operations: flock conflicts within a process too
	closed   bool
	db       *bolt.DB // the open handle; nil when the file is released
	probe    int      // a plain fd of the file while db is open, to see waiters
	heldAt   time.Time
	lastUsed time.Time
	idle     *time.Timer

	notifyMu sync.Mutex
	changed  chan struct{} // closed after each write of this process, then replaced
	mod      modWatch      // the watchers' one inotify instance on the file (watch.go)

	batch *batch // this burst's writes, not yet committed to the file (see wal.go); nil when none

	gc groupCommit // which revisions are durable; the fsync writers share (see group.go)

	etcd *etcdBackend // the store is kept in etcd (OpenEtcd), not in the file; nil for bbolt
}

// batch is the open read-write transaction that holds the writes of a
// burst, and the WAL that makes each of them durable until it is
// committed.
type batch struct {
	tx   *bolt.Tx
	wal  *wal
	recs []walRecord // what the WAL holds, to redo the batch after a failed Update
	last int64       // the newest revision written to the WAL (fsync'd or not); 0 if none
}

// Open opens the store at path, creating the file (0600) and its directory
// (0700) if needed. It does not keep the file open: each operation opens
// it. Open fails if the file is not a bbolt file or not a podlab store.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{
		history:     DefaultHistory,
		lockTimeout: DefaultLockTimeout,
		lingerIdle:  DefaultLingerIdle,
		lingerMax:   DefaultLingerMax,
		watchPoll:   DefaultWatchPoll,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case path == "":
		return nil, errors.New("opening the store: no path")
	case o.history < 1:
		return nil, fmt.Errorf("opening the store %s: history must keep at least 1 event, not %d", path, o.history)
	case o.lockTimeout <= 0:
		return nil, fmt.Errorf("opening the store %s: the lock timeout must be positive, not %s", path, o.lockTimeout)
	case o.lingerIdle < 0 || o.lingerMax < 0 || o.watchPoll <= 0:
		return nil, fmt.Errorf("opening the store %s: negative linger or non-positive watch poll", path)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("opening the store %s: it is a directory", path)
	case errors.Is(err, fs.ErrNotExist) && o.mustExist:
		return nil, fmt.Errorf("no store at %s: %w", path, fs.ErrNotExist)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	exists := err == nil && fi.Size() > 0
	if !exists {
		// A log left beside a file that is gone is not this file's.
		if err := os.Remove(walPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
	}
	s := &Store{path: path, opts: o, probe: -1, changed: make(chan struct{})}
	s.gc.cond.L = &s.gc.mu
	if err := s.init(exists); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// init makes the buckets of a new store, and checks an existing one.
func (s *Store) init(exists bool) error {
	ctx := context.Background()
	ready := false
	check := func(btx *bolt.Tx) error {
		if m := btx.Bucket(metaBucket); m != nil {
			if err := checkFormat(s.path, m.Get(metaFormat)); err != nil {
				return err
			}
			ready = btx.Bucket(kvBucket) != nil
			return nil
		}
		return btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			return fmt.Errorf("%s is a bbolt file but not a podlab store (it has a bucket %q)", s.path, name)
		})
	}
	if exists {
		if err := s.do(ctx, false, true, func(db *bolt.DB) error { return db.View(check) }); err != nil {
			return err
		}
		if ready {
			return nil
		}
	}
	return s.do(ctx, true, true, func(db *bolt.DB) error {
		return db.Update(func(btx *bolt.Tx) error {
			if err := check(btx); err != nil || ready {
				return err
			}
			for _, b := range [][]byte{kvBucket, metaBucket} {
				if _, err := btx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return btx.Bucket(metaBucket).Put(metaFormat, []byte(formatName))
		})
	})
}

// checkFormat accepts the layout this package reads, and refuses other
// podlab layouts with ErrLayout.
func checkFormat(path string, format []byte) error {
	f := string(format)
	switch {
	case f == formatName:
		return nil
	case strings.HasPrefix(f, formatPrefix):
		return fmt.Errorf("%s is a podlab store in layout %q, and this podlab reads layout %q only "+
			"(move the file away, then `podlab init` makes a new store): %w",
			path, strings.TrimPrefix(f, formatPrefix), formatLayout, ErrLayout)
	default:
		return fmt.Errorf("%s is not a podlab store (format %q, want %q)", path, f, formatName)
	}
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close releases the file. Operations and watchers fail with ErrClosed
// afterwards.
func (s *Store) Close() error {
	if s.etcd != nil {
		return s.etcd.cli.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	return s.release()
}

// Update runs fn in one read-write transaction. All of fn's writes get one
// new revision, which Update returns (the current revision if fn wrote
// nothing). If fn returns an error, nothing it did is stored and the
// revision does not move. The write is on disk (fsync'd, in the WAL) when
// Update returns; the file itself gets it when the burst's batch is
// committed (see wal.go). Concurrent Updates run fn one at a time, and
// share the WAL's fsyncs (see group.go).
//
// Functions the transaction registered with Tx.OnDurable run after that,
// just before Update returns.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) (int64, error) {
	if s.etcd != nil {
		return s.etcd.update(ctx, fn)
	}
	var rev, logged int64 // logged: the revision written to the WAL, to wait for
	var wrote bool
	var durable []func()
	err := s.do(ctx, true, true, func(db *bolt.DB) (err error) {
		if s.opts.lingerIdle == 0 || s.opts.noBatch {
			// With no linger the file is let go of right after: a batch
			// would only add the WAL's fsync to the commit's.
			return db.Update(func(btx *bolt.Tx) error {
				tx, err := newTx(btx, s.opts.history)
				if err != nil {
					return err
				}
				if err := runUpdate(tx, fn); err != nil {
					return err
				}
				rev, wrote, durable = tx.rev, tx.wrote, tx.durable
				return nil
			})
		}
		if s.batch == nil {
			if err := s.beginBatch(db); err != nil {
				return err
			}
		}
		tx, err := newTx(s.batch.tx, s.opts.history)
		if err != nil {
			return err
		}
		done := false
		defer func() { // deferred: a panic in fn must not leave its writes in the batch
			if !done && len(tx.ops) > 0 && s.batch != nil {
				if rerr := s.redoBatch(db); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
		}()
		if err := runUpdate(tx, fn); err != nil {
			return err
		}
		rev, wrote, durable = tx.rev, tx.wrote, tx.durable
		if len(tx.ops) == 0 {
			return nil
		}
		if !tx.wrote {
			// A compaction writes without a new revision, and a WAL record
			// is replayed by its revision: commit the batch now instead.
			done = true
			return s.commitBatch()
		}
		rec := walRecord{rev: tx.rev, ops: tx.ops}
		if err := s.batch.wal.write(rec.encode()); err != nil {
			return fmt.Errorf("writing the write-ahead log %s: %w", walPath(s.path), err)
		}
		done = true
		s.batch.recs = append(s.batch.recs, rec)
		s.batch.last, logged = tx.rev, tx.rev
		if s.batch.wal.off >= walSize {
			// The write is durable already: if the commit fails, the
			// handle goes, and the next open replays the WAL.
			if err := s.commitBatch(); err != nil {
				s.release()
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Not acknowledged before it is durable: wait for the fsync that covers
	// it, or lead it (group.go).
	if err := s.waitDurable(logged); err != nil {
		return 0, fmt.Errorf("storing revision %d: %w", logged, err)
	}
	if wrote {
		s.notify()
	}
	for _, f := range durable {
		f()
	}
	return rev, nil
}

// runUpdate runs fn, then the bookkeeping of a write (the revision,
// compaction).
func runUpdate(tx *Tx, fn func(tx *Tx) error) error {
	if err := fn(tx); err != nil {
		return err
	}
	return tx.finish()
}

// beginBatch opens the WAL and the batch's transaction. s.mu is held.
func (s *Store) beginBatch(db *bolt.DB) error {
	w, err := openWAL(s.path)
	if err != nil {
		return err
	}
	btx, err := db.Begin(true)
	if err != nil {
		w.f.Close()
		return err
	}
	s.batch = &batch{tx: btx, wal: w}
	return nil
}

// redoBatch throws away the batch's transaction, which a failed Update
// wrote into, and makes the batch's writes again in a new one. s.mu is
// held.
func (s *Store) redoBatch(db *bolt.DB) error {
	b := s.batch
	b.tx.Rollback()
	btx, err := db.Begin(true)
	if err == nil {
		for _, r := range b.recs {
			if err = r.apply(btx); err != nil {
				btx.Rollback()
				break
			}
		}
	}
	if err != nil {
		// The batch's writes are in the WAL: the next open replays them.
		s.batch = nil
		s.keepInWAL(b, err)
		s.release()
		return fmt.Errorf("redoing the batch after a failed write: %w", err)
	}
	b.tx = btx
	return nil
}

// commitBatch commits the batch to the file, then marks the WAL empty.
// s.mu is held.
func (s *Store) commitBatch() error {
	b := s.batch
	s.batch = nil
	if err := b.tx.Commit(); err != nil {
		err = fmt.Errorf("committing %d writes to %s: %w (the write-ahead log %s keeps them, and the next open replays them)",
			len(b.recs), s.path, err, walPath(s.path))
		s.keepInWAL(b, err) // its records stay: the next open replays them
		return err
	}
	s.gc.markDurable(b.last) // the commit fsync'd the file
	return b.wal.close()
}

// keepInWAL closes the WAL of a batch that will not be committed, after an
// fsync: its records, which some writers may still wait for, are then
// durable there, and the next open replays them. s.mu is held.
func (s *Store) keepInWAL(b *batch, cause error) {
	if b.last > 0 {
		if err := s.fsync(int(b.wal.f.Fd())); err != nil {
			s.gc.markFailed(b.last, errors.Join(cause, err))
		} else {
			s.gc.markDurable(b.last)
		}
	}
	b.wal.f.Close()
}

// View runs fn in one read-only transaction: a consistent snapshot. Writes
// inside it fail with ErrReadOnly. It sees this process's batch.
func (s *Store) View(ctx context.Context, fn func(tx *Tx) error) error {
	if s.etcd != nil {
		return s.etcd.view(ctx, fn)
	}
	var durable []func()
	var seen int64
	err := s.do(ctx, false, true, func(db *bolt.DB) error {
		seen = s.batchRevision()
		return s.read(db, func(tx *Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			durable = tx.durable
			return nil
		})
	})
	if err != nil {
		return err
	}
	// What fn saw may include writes of the batch whose fsync is still to
	// come: return only once they are durable, as their writers do.
	if err := s.waitDurable(seen); err != nil {
		return fmt.Errorf("reading the store: %w", err)
	}
	for _, f := range durable {
		f()
	}
	return nil
}

// batchRevision is the newest revision of the batch, which a read sees,
// durable or not; 0 without a batch. s.mu is held.
func (s *Store) batchRevision() int64 {
	if s.batch == nil {
		return 0
	}
	return s.batch.last
}

// read runs fn in a read-only Tx: over the batch if there is one, else in a
// bbolt read transaction. s.mu is held.
func (s *Store) read(db *bolt.DB, fn func(tx *Tx) error) error {
	if s.batch != nil {
		tx, err := newTx(s.batch.tx, s.opts.history)
		if err != nil {
			return err
		}
		tx.readOnly = true
		return fn(tx)
	}
	return db.View(func(btx *bolt.Tx) error {
		tx, err := newTx(btx, s.opts.history)
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// Revision is the store's current revision (0 for an empty store).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if s.etcd != nil {
		return s.etcd.revision(ctx)
	}
	var rev int64
	err := s.View(ctx, func(tx *Tx) error {
		rev = tx.Revision()
		return nil
	})
	return rev, err
}

// Compact removes the history up to and including revision rev (see
// Tx.Compact).
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if s.etcd != nil {
		return s.etcd.compact(ctx, rev)
	}
	_, err := s.Update(ctx, func(tx *Tx) error {
		_, err := tx.Compact(rev)
		return err
	})
	return err
}

// notify wakes this process's watchers after a write.
func (s *Store) notify() {
	s.notifyMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.notifyMu.Unlock()
}

// changes is closed by the next write of this process.
func (s *Store) changes() <-chan struct{} {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	return s.changed
}
