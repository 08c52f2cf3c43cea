package store

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Group commit: many writers, one fsync.
//
// An fsync costs about 2ms on the project's disk. If every Update paid its
// own, while holding the store's lock, the store could not take more than
// ~500 writes a second however many clients wrote at once. etcd's answer
// is to batch: its backend commits the writes of many requests together,
// and its raft log fsyncs the entries of many proposals with one call.
//
// podlab does the same with the WAL. An Update makes its writes in the
// batch's transaction and writes its record into the WAL's page cache under
// the store's lock (s.mu): that part is serialized, so the read-check-write
// of two writers of one key still conflicts (ErrConflict), and revisions
// stay strictly increasing, one per Update, in WAL order. Then it lets go
// of the lock and waits for its record to be durable:
//
//   - if no fsync is running, it becomes the leader: it notes the newest
//     revision in the WAL, fsyncs the WAL (outside the lock: other writers
//     go on writing their records meanwhile), and marks every revision up
//     to the one it noted durable;
//   - if an fsync is running, it waits for it to end. Its record was written
//     after that fsync began, so that fsync may not cover it: when it ends,
//     one of the waiters leads the next fsync, which covers them all.
//
// So with eight clients writing at once, one fsync acknowledges up to eight
// writes; with one client, each write still gets its own, as before.
// Nothing is acknowledged before the fsync that covers it returns: Update
// returns, and runs the functions registered with Tx.OnDurable, only then.
// Readers wait too: a View or a watch that saw a write of the batch not
// yet durable waits for its fsync before it returns what it read, so no
// client learns of a write that a crash could still take back. Committing
// the batch to the bbolt file (its commit fsyncs the file) makes every
// write of the batch durable as well.
//
// A crash loses only writes nobody was told of: a record written but not
// yet fsync'd may be missing or torn after a power loss, and replay stops at
// the first invalid record, so such a write is lost whole, never applied in
// part (each record is one Update's writes, under one CRC). If an fsync
// fails, the writes it was to cover fail with an error that says their
// outcome is unknown, the batch is dropped from memory, and the next open
// replays whatever of the WAL reached the disk.
type groupCommit struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu: an fsync ended, or a commit made revisions durable
	durable int64     // every revision up to it is durable
	syncing bool      // a leader is fsyncing the WAL
	failed  int64     // the revisions up to it (above durable) failed to become durable
	err     error     // why
	syncs   int64     // fsyncs made by leaders (tests count them)
}

// markDurable records that every revision up to rev is durable (a commit,
// or a leader's fsync) and wakes the waiters.
func (g *groupCommit) markDurable(rev int64) {
	g.mu.Lock()
	g.durable = max(g.durable, rev)
	g.cond.Broadcast()
	g.mu.Unlock()
}

// markFailed records that the revisions up to rev not yet durable may never
// be, and why.
func (g *groupCommit) markFailed(rev int64, err error) {
	g.mu.Lock()
	if rev > g.failed {
		g.failed, g.err = rev, err
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}

// waitDurable returns once revision rev is durable, leading an fsync of the
// WAL when none is running. s.mu must not be held.
func (s *Store) waitDurable(rev int64) error {
	if rev <= 0 {
		return nil
	}
	g := &s.gc
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.durable < rev {
		if rev <= g.failed {
			return fmt.Errorf("revision %d may or may not be stored (read it back to know): %w", rev, g.err)
		}
		if g.syncing {
			g.cond.Wait()
			continue
		}
		g.syncing = true
		g.mu.Unlock()
		upTo, err := s.syncWAL()
		g.mu.Lock()
		g.syncing = false
		g.cond.Broadcast()
		switch {
		case err != nil:
			if upTo > g.failed {
				g.failed, g.err = upTo, err
			}
		case upTo > 0:
			g.syncs++
			g.durable = max(g.durable, upTo)
		case g.durable < rev && rev > g.failed:
			// No batch, so it was committed or dropped, which marks its
			// revisions: this one was in none.
			return fmt.Errorf("revision %d is neither in the write-ahead log nor committed", rev)
		}
	}
	return nil
}

// syncWAL fsyncs the batch's WAL and returns the newest revision it holds
// (0 when there is no batch). It holds s.mu only to read the batch: the
// fsync runs on a duplicate of the WAL's descriptor, while other writers
// append their records. If the fsync fails, it drops the batch.
func (s *Store) syncWAL() (int64, error) {
	s.mu.Lock()
	b := s.batch
	if b == nil || b.last == 0 {
		s.mu.Unlock()
		return 0, nil
	}
	upTo := b.last
	fd, err := unix.Dup(int(b.wal.f.Fd()))
	s.mu.Unlock()
	if err == nil {
		err = s.fsync(fd)
		unix.Close(fd)
	}
	if err == nil {
		return upTo, nil
	}
	err = fmt.Errorf("fsyncing the write-ahead log %s: %w", walPath(s.path), err)
	s.mu.Lock()
	if s.batch == b {
		upTo = max(upTo, b.last)
		s.dropBatch()
	}
	s.mu.Unlock()
	return upTo, err
}

// fsync makes what was written to the file fd durable (fdatasync, or the
// test's stand-in).
func (s *Store) fsync(fd int) error {
	if s.opts.fsync != nil {
		return s.opts.fsync(fd)
	}
	return unix.Fdatasync(fd)
}

// dropBatch throws the batch away without committing it, and lets go of
// the file: the next open replays what of the WAL is on disk. s.mu is held.
func (s *Store) dropBatch() {
	b := s.batch
	s.batch = nil
	b.tx.Rollback()
	b.wal.f.Close()
	s.release()
}
