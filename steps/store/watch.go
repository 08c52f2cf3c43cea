package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

const (
	// watchBatch bounds the events one look at the history reads (rounded
	// up to a whole revision), so that a watcher far behind holds the file
	// briefly.
	watchBatch = 1000
	// pollWithoutInotify is how often a watcher looks when inotify fails.
	pollWithoutInotify = 25 * time.Millisecond
)

// Watcher delivers the events of one Watch, in revision order.
type Watcher struct {
	events chan Event

	mu  sync.Mutex
	err error
}

// Events is closed when the watch's context ends or the watch fails; then
// Err says why.
func (w *Watcher) Events() <-chan Event { return w.events }

// Err is nil while the watch runs and after its context ended; ErrCompacted
// if the watcher fell behind compaction (list again, then watch from the
// list's revision); else the error that ended it.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Watch delivers every event with a revision after afterRev whose key
// starts with prefix, in order, then the events of later writes as they
// happen, from this process or any other. It fails at once with
// ErrCompacted if the history no longer holds the events after afterRev.
//
// The watcher reads the history (bucket revs) itself, by revision, so it
// never misses an event: notifications only tell it when to look. It looks
// when this process writes, when inotify reports that the file was modified
// (another process wrote), and every 100ms in case a notification was lost
// (every 25ms without inotify).
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (*Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("watching %s: %w", prefix, err)
	}
	if s.etcd != nil {
		return s.etcd.watch(ctx, prefix, afterRev)
	}
	if err := checkKey(prefix); err != nil {
		return nil, fmt.Errorf("watching %q: %w", prefix, err)
	}
	if afterRev < 0 {
		return nil, fmt.Errorf("watching %s from revision %d: %w", prefix, afterRev, ErrBadRevision)
	}
	var compacted, current int64
	if err := s.View(ctx, func(tx *Tx) error {
		compacted, current = tx.CompactedRevision(), tx.Revision()
		return nil
	}); err != nil {
		return nil, fmt.Errorf("watching %s: %w", prefix, err)
	}
	if afterRev > current {
		// etcd's answer too (mvcc: required revision is a future revision):
		// a revision of another store, or of this one before it was restored
		return nil, fmt.Errorf("watching %s from revision %d: the store is at revision %d: %w", prefix, afterRev, current, ErrBadRevision)
	}
	if afterRev < compacted {
		return nil, fmt.Errorf("watching %s from revision %d: the history was compacted up to revision %d: %w",
			prefix, afterRev, compacted, ErrCompacted)
	}
	w := &Watcher{events: make(chan Event, 128)}
	go w.run(ctx, s, prefix, afterRev)
	return w, nil
}

func (w *Watcher) run(ctx context.Context, s *Store, prefix string, last int64) {
	defer close(w.events)
	poll := s.opts.watchPoll
	var modified <-chan struct{}
	if !s.opts.noInotify {
		ch, stop, err := s.mod.subscribe(s.path)
		if err != nil {
			poll = min(poll, pollWithoutInotify)
		} else {
			defer stop()
			modified = ch
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		changed := s.changes() // taken before reading: a write after the read closes it
		evs, upTo, more, err := s.readLog(ctx, prefix, last, watchBatch)
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
		for _, ev := range evs {
			select {
			case w.events <- ev:
			case <-ctx.Done():
				return
			}
		}
		last = upTo
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-modified:
		case <-tick.C:
		}
	}
}

// readLog reads the events after revision after whose key starts with
// prefix, at most about limit events, from the records of revs. upTo is the
// revision read up to; more says the limit stopped it.
func (s *Store) readLog(ctx context.Context, prefix string, after int64, limit int) (evs []Event, upTo int64, more bool, err error) {
	p := []byte(prefix)
	var seen int64
	err = s.do(ctx, false, false, func(db *bolt.DB) error {
		seen = s.batchRevision()
		return s.read(db, func(tx *Tx) error {
			if after < tx.compacted {
				return fmt.Errorf("watching %s: the watcher is at revision %d and the history was compacted up to revision %d: %w",
					prefix, after, tx.compacted, ErrCompacted)
			}
			upTo = after
			n := 0
			c := tx.revs.Cursor()
			for k, v := c.Seek(revKey(after+1, 0)); k != nil; k, v = c.Next() {
				rev := revisionOf(k)
				if n >= limit && rev != upTo {
					more = true
					break
				}
				upTo = rev
				n++
				rec, ok := parseRecord(v)
				if !ok {
					return fmt.Errorf("corrupt store: the record at revision %d is truncated", rev)
				}
				if bytes.HasPrefix(rec.key, p) {
					evs = append(evs, tx.event(rev, rec))
				}
			}
			if !more {
				upTo = max(upTo, tx.rev)
			}
			return nil
		})
	})
	if err == nil {
		// No event before its write is durable (see group.go).
		err = s.waitDurable(seen)
	}
	return evs, upTo, more, err
}

// modWatch is the store's one inotify instance (IN_MODIFY on the file:
// bbolt's writes of a commit, by any process), shared by every watcher of
// this Store: each subscriber gets a wake-up channel of its own. An
// instance per watcher would spend the kernel's per-user limit
// (fs.inotify.max_user_instances, 128 by default) that other programs
// need too: containerd's CRI plugin fails to start without one. The
// instance is closed when the last watcher goes.
type modWatch struct {
	mu   sync.Mutex
	f    *os.File // the inotify instance; nil while nobody watches
	subs map[chan struct{}]struct{}
}

// subscribe returns a channel that receives (at most one pending) wake-up
// each time the kernel says path was modified, and the function that ends
// the subscription.
func (m *modWatch) subscribe(path string) (<-chan struct{}, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		f, err := inotifyModify(path)
		if err != nil {
			return nil, nil, err
		}
		m.f, m.subs = f, map[chan struct{}]struct{}{}
		go m.fanOut(f)
	}
	ch := make(chan struct{}, 1)
	m.subs[ch] = struct{}{}
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.subs[ch]; !ok {
			return
		}
		delete(m.subs, ch)
		if len(m.subs) == 0 && m.f != nil {
			m.f.Close()
			m.f = nil
		}
	}, nil
}

// fanOut reads f's events until it is closed and wakes every subscriber.
func (m *modWatch) fanOut(f *os.File) {
	buf := make([]byte, 4096)
	for {
		if _, err := f.Read(buf); err != nil {
			return
		}
		m.mu.Lock()
		if m.f != f {
			m.mu.Unlock()
			return
		}
		for ch := range m.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		m.mu.Unlock()
	}
}

// inotifyModify opens an inotify instance watching path for IN_MODIFY. A
// non-blocking fd goes to Go's poller: Close wakes a Read in progress.
func inotifyModify(path string) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "inotify "+path), nil
}
