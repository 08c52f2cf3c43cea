package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// How the store shares its file between processes.
//
// bbolt takes an exclusive flock on the file for as long as a read-write
// handle is open, and a shared one for a read-only handle. kubectl-style
// commands, `get -w` watchers, the scheduler and the kubelets are separate
// podlab processes on the same file, so no process may keep it open while
// idle. Each operation opens the file; the handle then lingers for
// lingerIdle (2ms) after the last operation, so that back-to-back operations
// of one process (a loop of creates, a read then a write) share one open.
//
// Measured on the project's machine (2 shared cores, virtio disk, noisy
// under the other builds): bbolt Open+Close of a store of 10,000 objects
// takes ~40-53µs read-write, ~26-31µs read-only (BenchmarkOpenClose); one
// fsync'd bbolt Update ~300-550µs, most of it the two fsyncs and the ~8
// pages a commit writes. Opening and closing around every write
// (WithLinger(0, 0)) ran at 0.67-0.80x the rate of a handle kept open. And
// while the handle is held, the writes go into one batch, made durable in
// the WAL (concurrent writers sharing fsyncs: group.go) and committed to
// the file when the handle goes (see wal.go): through the API server's whole gate, a process opening the
// store, creating 20 pods and closing it ran at 1.02-1.18x the rate of raw
// bbolt writes of the same size, one commit each (internal/bench).
//
// So the handle lingers: one open, and one commit, per burst instead of one
// per write.
//
// Taking turns: a process that finds the file locked waits, trying again
// every retryEvery, and says so by holding an OFD read lock (fcntl
// F_OFD_SETLK, independent of bbolt's flock) on byte 0 of the file while it
// waits. A process holding the file checks for such a lock (F_OFD_GETLK,
// one syscall) before reusing its handle: once it has held the file for
// lingerMax (25ms) and someone waits, it closes the file and lets the
// waiters in (yield). A process that let go of the file and opens it
// again first lets the waiters in too (letWaitersFirst): its commit at the
// end of the linger would otherwise leave them only a sliver of time
// before its next operation. A watcher in another process thus waits at most
// ~25ms for a writer that writes back to back, and the writer loses a few
// milliseconds per 25ms only while someone waits. Measured with
// BenchmarkWatchLatency (event received minus the time before the other
// process's Update): writer back to back (with the WAL, ~7,000 writes a
// second) p50 21ms, p99 36ms; writer every 5ms p50 4.4ms, p99 8ms.
const (
	retryEvery  = 500 * time.Microsecond
	yieldPause  = 5 * time.Millisecond
	yieldPoll   = 200 * time.Microsecond
	noticeAfter = 100 * time.Millisecond
)

// do runs fn with an open handle (read-write if write), after waiting for
// other processes if needed, then lets the handle linger. With keep false
// (a watcher's look at the log), a handle opened for fn is closed right
// after it instead.
func (s *Store) do(ctx context.Context, write, keep bool, fn func(db *bolt.DB) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	wasOpen := s.db != nil
	db, err := s.acquire(ctx, write)
	if err != nil {
		return err
	}
	defer func() { // deferred: a panic in fn must not leave the file locked
		if keep || wasOpen {
			s.linger()
		} else if cerr := s.release(); err == nil {
			err = cerr
		}
	}()
	return fn(db)
}

// acquire returns the lingering handle if it fits, or opens a new one.
// s.mu is held.
func (s *Store) acquire(ctx context.Context, write bool) (*bolt.DB, error) {
	if s.db != nil {
		switch {
		case write && s.db.IsReadOnly():
			s.release()
		case time.Since(s.heldAt) >= s.opts.lingerMax && waitersOn(s.probe):
			s.release() // yield: letWaitersFirst lets them in
		default:
			return s.db, nil
		}
	}
	if err := s.letWaitersFirst(ctx); err != nil {
		return nil, err
	}
	// A WAL that may hold writes a process died with needs a read-write
	// open, to replay them.
	replay := write || walHasRecords(s.path)
	db, err := s.open(ctx, !replay)
	if err != nil {
		return nil, err
	}
	if replay {
		if _, err := recoverWAL(db, s.path); err != nil {
			db.Close()
			return nil, err
		}
	}
	s.db, s.heldAt = db, time.Now()
	if fd, err := unix.Open(s.path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.probe = fd
	}
	return db, nil
}

// linger closes the handle now (lingerIdle 0), or lingerIdle after the last
// operation. s.mu is held.
func (s *Store) linger() {
	if s.opts.lingerIdle == 0 {
		s.release()
		return
	}
	s.lastUsed = time.Now()
	if s.idle == nil {
		s.idle = time.AfterFunc(s.opts.lingerIdle, s.closeIdle)
	} else {
		s.idle.Reset(s.opts.lingerIdle)
	}
}

func (s *Store) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil || s.closed {
		return
	}
	if left := s.opts.lingerIdle - time.Since(s.lastUsed); left > 0 {
		s.idle.Reset(left)
		return
	}
	s.release()
}

// release commits the batch, then closes the handle, which drops bbolt's
// flock. s.mu is held.
func (s *Store) release() error {
	var err error
	if s.batch != nil {
		err = s.commitBatch()
	}
	if s.probe >= 0 {
		unix.Close(s.probe)
		s.probe = -1
	}
	if s.db == nil {
		return err
	}
	cerr := s.db.Close()
	s.db = nil
	if cerr != nil && err == nil {
		err = fmt.Errorf("closing the store %s: %w", s.path, cerr)
	}
	return err
}

// letWaitersFirst waits, up to yieldPause, while another process waits for
// the file. A process that lets go of the file between two operations (its
// linger ended, its batch committed) and takes it again at once would
// otherwise leave the waiters only a sliver of time to get in.
func (s *Store) letWaitersFirst(ctx context.Context) error {
	fd, err := unix.Open(s.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // a new file: nobody waits for it
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(yieldPause)
	for waitersOn(fd) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the store %s: %w", s.path, ctx.Err())
		case <-time.After(yieldPoll):
		}
	}
	return nil
}

// waitersOn reports whether another open file of the same file holds a
// waiting lock (see announceWaiting).
func waitersOn(fd int) bool {
	if fd < 0 {
		return false
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// open opens the file with bbolt, trying every retryEvery while another
// process holds it, for at most the lock timeout.
func (s *Store) open(ctx context.Context, readOnly bool) (*bolt.DB, error) {
	start := time.Now()
	waiting := -1 // fd holding the waiting lock
	defer func() {
		if waiting >= 0 {
			unix.Close(waiting)
		}
	}()
	noticed := false
	var t *time.Timer
	for {
		db, err := bolt.Open(s.path, 0o600, s.boltOptions(readOnly))
		if err == nil {
			if t != nil {
				t.Stop()
			}
			return db, nil
		}
		if !errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("opening the store %s: %w", s.path, err)
		}
		if waiting < 0 {
			waiting = announceWaiting(s.path)
		}
		waited := time.Since(start)
		if waited >= s.opts.lockTimeout {
			hint := "another process kept it open"
			if h := lockHolders(s.path); h != "" {
				hint = h + " kept it open"
			}
			return nil, fmt.Errorf("opening the store %s: waited %s: %s (stop it, or retry): %w",
				s.path, waited.Round(time.Millisecond), hint, ErrBusy)
		}
		if !noticed && waited >= noticeAfter && s.opts.waitNotice != nil {
			noticed = true
			s.opts.waitNotice(waited)
		}
		if t == nil {
			t = time.NewTimer(retryEvery)
		} else {
			t.Reset(retryEvery)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the store %s: %w", s.path, ctx.Err())
		case <-t.C:
		}
	}
}

// boltOptions are the options of every bbolt open: bbolt's defaults, the
// freelist written at every commit. etcd opens its file with NoFreelistSync
// and the hashmap freelist, and keeps it open for its whole life. podlab
// opens the file for every burst, and bbolt rebuilds a freelist that was not
// written by walking the whole file at every read-write open: 8.1ms for
// 10,000 objects instead of 40-53µs (BenchmarkOpenClose). Skipping the
// freelist page did not make writes measurably faster here
// (store-nofreelistsync in BenchmarkWrites: 0.78-0.97x raw, the store
// 0.72-0.95x in the same runs), nor did the hashmap freelist alone.
func (s *Store) boltOptions(readOnly bool) *bolt.Options {
	// Timeout 1ns: one non-blocking flock, then bbolt's ErrTimeout (its own
	// retry sleeps 50ms, too coarse to take turns).
	o := &bolt.Options{Timeout: time.Nanosecond, ReadOnly: readOnly}
	if s.opts.bolt != nil {
		s.opts.bolt(o)
	}
	return o
}

// announceWaiting takes an OFD read lock on byte 0 of the file, which the
// holder sees with othersWaiting. It returns the fd to close when done, or
// -1.
func announceWaiting(path string) int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		unix.Close(fd)
		return -1
	}
	return fd
}

// lockHolders names the processes holding a flock on path, from
// /proc/locks: "pid 1234 (podlab)". It returns "" if it cannot tell.
func lockHolders(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	var holders []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters have "->".
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		h := "pid " + fields[4]
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			h += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		holders = append(holders, h)
	}
	return strings.Join(holders, ", ")
}
