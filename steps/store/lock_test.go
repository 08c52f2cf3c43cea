package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// holdRaw opens the file with bbolt directly, as another program would, and
// keeps it (and its flock) until the returned func is called.
func holdRaw(t *testing.T, path string) func() {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("the store did not release its file: %v", err)
	}
	return func() { db.Close() }
}

func TestStore_Open_ReleasesTheFileWhenIdle(t *testing.T) {
	s, path := tempStore(t)
	if _, err := s.Update(context.Background(), create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	// The store lingers for 5ms, then closes: a raw bbolt handle gets the
	// exclusive lock (holdRaw fails after 5s otherwise).
	holdRaw(t, path)()
}

func TestStore_Update_WaitsThenFailsWithErrBusy(t *testing.T) {
	var notices atomic.Int32
	s, path := tempStore(t, WithLockTimeout(400*time.Millisecond),
		WithWaitNotice(func(time.Duration) { notices.Add(1) }))
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	release := holdRaw(t, path)
	tests := []struct {
		name string
		op   func() error
	}{
		{"update", func() error { _, err := s.Update(ctx, create("/b", "1")); return err }},
		{"view", func() error { return s.View(ctx, func(*Tx) error { return nil }) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notices.Store(0)
			err := tt.op()
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("got %v, want ErrBusy", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", syscall.Getpid())) {
				t.Errorf("the error does not name the holder (this process): %v", err)
			}
			t.Log(err)
			if n := notices.Load(); n != 1 {
				t.Errorf("wait notice called %d times, want once", n)
			}
		})
	}
	release()
	if rev, err := s.Update(ctx, create("/b", "1")); err != nil || rev != 2 {
		t.Fatalf("after the holder left: revision %d, %v; want 2", rev, err)
	}
	if kv, ok := get(t, s, "/a"); !ok || string(kv.Value) != "1" {
		t.Errorf("/a after the wait: %+v, %v", kv, ok)
	}
}

func TestStore_Update_WaitsForTheHolder(t *testing.T) {
	var notices atomic.Int32
	s, path := tempStore(t, WithWaitNotice(func(time.Duration) { notices.Add(1) }))
	ctx := context.Background()
	release := holdRaw(t, path)
	go func() {
		time.Sleep(300 * time.Millisecond)
		release()
	}()
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatalf("Update did not wait for the holder: %v", err)
	}
	if notices.Load() != 1 {
		t.Errorf("wait notice called %d times, want once", notices.Load())
	}
}

func TestStore_Update_WaitHonorsContext(t *testing.T) {
	s, path := tempStore(t)
	defer holdRaw(t, path)()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Update(ctx, create("/a", "1")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's error", err)
	}
}

// TestStore_Update_TakesTurns: while a child process writes back to back,
// this process's writes still get the file, well within the lock timeout.
func TestStore_Update_TakesTurns(t *testing.T) {
	s, path := tempStore(t, WithLockTimeout(time.Second))
	ctx := context.Background()
	cmd, out := helper(t, "busy", path, "3s")
	if !out.Scan() || out.Text() != "started" {
		t.Fatalf("child did not start: %v", cmd.Wait())
	}
	var longest time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		if _, err := s.Update(ctx, create(fmt.Sprintf("/turns/%d", i), "v")); err != nil {
			t.Fatalf("write %d while another process writes: %v", i, err)
		}
		longest = max(longest, time.Since(start))
	}
	t.Logf("20 writes while the child writes back to back; the longest took %s", longest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the busy child: %v", err)
	}
}

// TestStore_Update_SurvivesSIGKILL kills a writing child at a random moment:
// every write it acknowledged is in the file, and the file checks clean.
func TestStore_Update_SurvivesSIGKILL(t *testing.T) {
	_, path := tempStore(t)
	for run := 0; run < 5; run++ {
		cmd, out := helper(t, "forever", path, fmt.Sprintf("/kill/%d", run))
		acked := make(chan map[string]int64)
		go func() {
			m := map[string]int64{}
			for out.Scan() {
				rev, key, _ := strings.Cut(out.Text(), " ")
				n, _ := strconv.ParseInt(rev, 10, 64)
				m[key] = n
			}
			acked <- m
		}()
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		m := <-acked

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
		for key, rev := range m {
			kv, ok := get(t, s, key)
			if !ok || kv.ModRevision != rev {
				t.Errorf("run %d: acknowledged %s at revision %d, found %+v %v", run, key, rev, kv, ok)
			}
		}
		s.Close()
		t.Logf("run %d: %d acknowledged writes, all there", run, len(m))
	}
}
