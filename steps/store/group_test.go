package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// diskModel stands in for the WAL's fsync: it makes the real fdatasync,
// after a pause as long as the project's disk takes, and remembers the
// newest revision each fsync covered, read back from the file as the fsync
// began: what a power loss would have left.
type diskModel struct {
	pause time.Duration
	block chan struct{} // when set, the first fsync waits for it to close

	mu      sync.Mutex
	syncs   int
	durable int64 // the newest revision the fsyncs made durable
	started chan struct{}
}

func (d *diskModel) fsync(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	b := make([]byte, st.Size)
	if _, err := unix.Pread(fd, b, 0); err != nil {
		return err
	}
	var newest int64
	for {
		r, n, ok := parseWALRecord(b)
		if !ok {
			break
		}
		newest = max(newest, r.rev)
		b = b[n:]
	}
	d.mu.Lock()
	first := d.syncs == 0
	d.syncs++
	d.mu.Unlock()
	if first && d.block != nil {
		close(d.started)
		<-d.block
	}
	time.Sleep(d.pause)
	if err := unix.Fdatasync(fd); err != nil {
		return err
	}
	d.mu.Lock()
	d.durable = max(d.durable, newest)
	d.mu.Unlock()
	return nil
}

func (d *diskModel) covered(rev int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.durable >= rev
}

// Eight writers at once share the WAL's fsyncs, and none of them is told
// "stored" before an fsync that covers its write has returned.
func TestStore_Update_GroupCommit(t *testing.T) {
	tests := []struct {
		name    string
		writers int
		each    int
		// most is the most fsyncs the writes may take
		most func(writes int) int
	}{
		{"one writer, one fsync per write", 1, 40, func(w int) int { return w }},
		{"eight writers share fsyncs", 8, 40, func(w int) int { return w / 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := &diskModel{pause: 2 * time.Millisecond}
			s, _ := tempStore(t, WithLinger(time.Hour, time.Hour), withFsync(disk.fsync))
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make(chan error, tt.writers*tt.each)
			for w := range tt.writers {
				wg.Go(func() {
					for i := range tt.each {
						var rev int64
						got, err := s.Update(ctx, func(tx *Tx) error {
							if _, err := tx.Create(fmt.Sprintf("/g/%d/%d", w, i), []byte("v")); err != nil {
								return err
							}
							rev = tx.Revision()
							tx.OnDurable(func() {
								if !disk.covered(rev) {
									errs <- fmt.Errorf("revision %d acknowledged before an fsync covered it", rev)
								}
							})
							return nil
						})
						if err == nil && !disk.covered(got) {
							err = fmt.Errorf("Update returned revision %d before an fsync covered it", got)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			writes := tt.writers * tt.each
			if rev, err := s.Revision(ctx); err != nil || rev != int64(writes) {
				t.Errorf("revision %d, %v; want %d, one per write", rev, err, writes)
			}
			if disk.syncs > tt.most(writes) {
				t.Errorf("%d writes took %d fsyncs, want at most %d", writes, disk.syncs, tt.most(writes))
			}
			t.Logf("%d writes, %d fsyncs", writes, disk.syncs)
		})
	}
}

// While an fsync runs, other writers go on: their transactions run (the
// store's lock is not held through the fsync), and they wait only for the
// next fsync. A read that saw a write not yet durable waits for it too.
func TestStore_Update_WritesDuringAnFsync(t *testing.T) {
	disk := &diskModel{block: make(chan struct{}), started: make(chan struct{})}
	s, _ := tempStore(t, WithLinger(time.Hour, time.Hour), withFsync(disk.fsync))
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := s.Update(ctx, create("/f/1", "one")); first <- err }()
	<-disk.started // the first write's fsync is under way, and held

	ran := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, func(tx *Tx) error {
			close(ran)
			_, err := tx.Create("/f/2", []byte("two"))
			return err
		})
		second <- err
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		close(disk.block)
		t.Fatal("a second writer could not run its transaction while the first write's fsync ran")
	}
	read := make(chan int, 1)
	go func() {
		n := 0
		s.View(ctx, func(tx *Tx) error {
			kvs, err := tx.List("/f/")
			n = len(kvs)
			return err
		})
		read <- n
	}()
	select {
	case err := <-first:
		t.Fatalf("the first write returned (%v) before its fsync did", err)
	case err := <-second:
		t.Fatalf("the second write returned (%v) before any fsync covered it", err)
	case n := <-read:
		t.Fatalf("a read returned %d keys while the writes it saw were not durable", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(disk.block)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if n := <-read; n != 2 {
		t.Errorf("the read saw %d keys, want 2", n)
	}
}

// Two writers updating one key from the same revision: the check and the
// write are serialized, so exactly one wins and the other conflicts, even
// when their fsyncs are shared.
func TestStore_Update_GroupCommitStillConflicts(t *testing.T) {
	disk := &diskModel{pause: 2 * time.Millisecond}
	s, _ := tempStore(t, WithLinger(time.Hour, time.Hour), withFsync(disk.fsync))
	ctx := context.Background()
	rev, err := s.Update(ctx, create("/c/x", "0"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		var wg sync.WaitGroup
		results := make(chan error, 4)
		for w := range 4 {
			wg.Go(func() {
				_, err := s.Update(ctx, put("/c/x", fmt.Sprintf("%d-%d", round, w), rev))
				results <- err
			})
		}
		wg.Wait()
		close(results)
		won := 0
		for err := range results {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrConflict):
				t.Fatalf("round %d: %v, want nil or ErrConflict", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers won from revision %d, want 1", round, won, rev)
		}
		kv, _ := get(t, s, "/c/x")
		rev = kv.ModRevision
	}
}

// TestStore_Update_GroupCommitSurvivesSIGKILL kills a child whose eight
// writers share fsyncs, right after it acknowledged a number of writes:
// every acknowledged write is there, and every write, acknowledged or not,
// is there whole or not at all (each writes two keys in one transaction).
func TestStore_Update_GroupCommitSurvivesSIGKILL(t *testing.T) {
	_, path := tempStore(t)
	for run := range 4 {
		prefix := fmt.Sprintf("/batch/%d", run)
		cmd, out := helper(t, "concurrent", path, prefix)
		acked := map[string]int64{}
		killAt := 50 + rand.IntN(300)
		for out.Scan() {
			rev, key, _ := strings.Cut(out.Text(), " ")
			n, _ := strconv.ParseInt(rev, 10, 64)
			acked[key] = n
			if len(acked) == killAt {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for out.Scan() { // acknowledged before the signal landed
			rev, key, _ := strings.Cut(out.Text(), " ")
			n, _ := strconv.ParseInt(rev, 10, 64)
			acked[key] = n
		}
		cmd.Wait()
		if len(acked) < killAt {
			t.Fatalf("run %d: the child acknowledged %d writes, fewer than %d", run, len(acked), killAt)
		}

		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, ReadOnly: true})
		if err != nil {
			t.Fatalf("run %d: reopening after SIGKILL: %v", run, err)
		}
		err = db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatalf("run %d: the file does not check clean: %v", run, err)
		}

		s, err := Open(path, MustExist())
		if err != nil {
			t.Fatal(err)
		}
		for key, rev := range acked {
			kv, ok := get(t, s, key)
			if !ok || kv.ModRevision != rev {
				t.Errorf("run %d: acknowledged %s at revision %d, found %+v %v", run, key, rev, kv, ok)
			}
		}
		var kvs []KV
		if err := s.View(context.Background(), func(tx *Tx) error {
			kvs, err = tx.List(prefix + "/")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		halves := map[string]int{}
		for _, kv := range kvs {
			halves[strings.TrimSuffix(strings.TrimSuffix(kv.Key, "/a"), "/b")]++
		}
		for w, n := range halves {
			if n != 2 {
				t.Errorf("run %d: write %s is half there (%d of its 2 keys)", run, w, n)
			}
		}
		s.Close()
		t.Logf("run %d: killed after %d acknowledgements; %d writes stored, none in part", run, len(acked), len(halves))
	}
}
