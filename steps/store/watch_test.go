package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// collect receives n events, or fails the test after a generous deadline.
func collect(t *testing.T, w *Watcher, n int) []Event {
	t.Helper()
	var got []Event
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended after %d events: %v", len(got), w.Err())
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("%d events after 30s, want %d", len(got), n)
		}
	}
	return got
}

// checkEvents compares got with want by type, key and value, and checks
// that revisions never go down.
func checkEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	var last int64
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.KV.Key != w.KV.Key || !bytes.Equal(g.KV.Value, w.KV.Value) {
			t.Fatalf("event %d: %s %s %q, want %s %s %q", i, g.Type, g.KV.Key, g.KV.Value, w.Type, w.KV.Key, w.KV.Value)
		}
		if g.Revision < last {
			t.Fatalf("event %d: revision %d after %d", i, g.Revision, last)
		}
		if (g.Type == Added) != (g.PrevKV == nil) {
			t.Fatalf("event %d: %s with PrevKV %v", i, g.Type, g.PrevKV)
		}
		last = g.Revision
	}
}

func TestStore_Watch_SameProcess(t *testing.T) {
	tests := []struct {
		name  string
		after int64 // watch from this revision of the script below
		want  []Event
	}{
		{"from the start", 0, []Event{
			{Type: Added, KV: KV{Key: "/w/a", Value: []byte("1")}},
			{Type: Modified, KV: KV{Key: "/w/a", Value: []byte("2")}},
			{Type: Deleted, KV: KV{Key: "/w/a", Value: []byte("2")}},
		}},
		{"from the revision of the first write", 1, []Event{
			{Type: Modified, KV: KV{Key: "/w/a", Value: []byte("2")}},
			{Type: Deleted, KV: KV{Key: "/w/a", Value: []byte("2")}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := tempStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Half of the script before the watch, half after: the watch
			// replays the log, then follows it.
			script := []func(*Tx) error{create("/w/a", "1"), create("/x/b", "other"), put("/w/a", "2", 0), del("/w/a", 0)}
			for _, fn := range script[:2] {
				if _, err := s.Update(ctx, fn); err != nil {
					t.Fatal(err)
				}
			}
			w, err := s.Watch(ctx, "/w/", tt.after)
			if err != nil {
				t.Fatal(err)
			}
			for _, fn := range script[2:] {
				if _, err := s.Update(ctx, fn); err != nil {
					t.Fatal(err)
				}
			}
			got := collect(t, w, len(tt.want))
			checkEvents(t, got, tt.want)
			cancel()
			for range w.Events() {
			}
			if err := w.Err(); err != nil {
				t.Errorf("Err after cancel: %v, want nil", err)
			}
		})
	}
}

// TestStore_Watch_AcrossProcesses watches while a child process writes:
// every event arrives, in order, through inotify or through polling.
func TestStore_Watch_AcrossProcesses(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"inotify", nil},
		{"polling only", []Option{WithWatchPoll(25*time.Millisecond, false)}},
	}
	const n = 60
	var want []Event
	for _, step := range writeScript(n) {
		want = append(want, step.want...)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := tempStore(t, tt.opts...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.Watch(ctx, "/registry/", 0)
			if err != nil {
				t.Fatal(err)
			}
			cmd, out := helper(t, "script", path, strconv.Itoa(n))
			if !out.Scan() {
				t.Fatalf("the child printed no revision: %v", cmd.Wait())
			}
			last, err := strconv.ParseInt(out.Text(), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			got := collect(t, w, len(want))
			if r := got[len(got)-1].Revision; r != last {
				t.Errorf("last event at revision %d, the child's last write at %d", r, last)
			}
			checkEvents(t, got, want)
			// Nothing more than the script: the next event is our own marker.
			if _, err := s.Update(ctx, create("/registry/marker", "m")); err != nil {
				t.Fatal(err)
			}
			if ev := collect(t, w, 1)[0]; ev.KV.Key != "/registry/marker" {
				t.Errorf("an extra event: %s %s at %d", ev.Type, ev.KV.Key, ev.Revision)
			}
			if got[len(got)-1].Revision != got[len(got)-2].Revision {
				t.Errorf("the last transaction's two events have revisions %d and %d",
					got[len(got)-2].Revision, got[len(got)-1].Revision)
			}
		})
	}
}

func TestStore_Compact_Auto(t *testing.T) {
	const history = 20
	s, _ := tempStore(t, WithHistory(history))
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if _, err := s.Update(ctx, create(fmt.Sprintf("/k/%03d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	var compacted, events int64
	s.View(ctx, func(tx *Tx) error {
		compacted, events = tx.CompactedRevision(), tx.Events()
		return nil
	})
	if compacted == 0 || events > history+compactSlack(history) || events < history {
		t.Fatalf("after 100 writes: compacted %d, %d events; want compaction and %d..%d events",
			compacted, events, history, history+compactSlack(history))
	}
	evs, upTo, _, err := s.readLog(ctx, "/", compacted, watchBatch)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != events || upTo != 100 || evs[0].Revision != compacted+1 {
		t.Errorf("log: %d events from %d up to %d; want %d from %d up to 100", len(evs), evs[0].Revision, upTo, events, compacted+1)
	}
	if _, ok := get(t, s, "/k/000"); !ok {
		t.Error("compaction removed a key: it must only remove history")
	}
	if _, err := s.Watch(ctx, "/", compacted-1); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch from before the compaction: %v, want ErrCompacted", err)
	}
}

func TestStore_Compact_Explicit(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		if _, err := s.Update(ctx, create(fmt.Sprintf("/k/%02d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	var removed int
	if _, err := s.Update(ctx, func(tx *Tx) error {
		var err error
		removed, err = tx.Compact(5)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if removed != 5 {
		t.Errorf("removed %d events, want 5", removed)
	}
	tests := []struct {
		name    string
		after   int64
		wantErr error
	}{
		{"from before the compacted revision", 4, ErrCompacted},
		{"from the start", 0, ErrCompacted},
		{"from the compacted revision", 5, nil},
		{"from the current revision", 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w, err := s.Watch(wctx, "/", tt.after)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if tt.after < 10 {
				got := collect(t, w, int(10-tt.after))
				if len(got) != int(10-tt.after) || got[0].Revision != tt.after+1 {
					t.Errorf("%d events from %d, want %d from %d", len(got), got[0].Revision, 10-tt.after, tt.after+1)
				}
			}
		})
	}
	if err := s.Compact(ctx, 3); err != nil {
		t.Errorf("compacting to an already compacted revision: %v, want nothing done", err)
	}
	if rev, _ := s.Revision(ctx); rev != 10 {
		t.Errorf("compaction moved the revision to %d", rev)
	}
	if err := s.Compact(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(ctx, "/", 9); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch after compacting everything: %v, want ErrCompacted", err)
	}
}

// TestStore_Watch_FallsBehind: a watcher that has not read everything when
// the log is compacted under it ends with ErrCompacted.
func TestStore_Watch_FallsBehind(t *testing.T) {
	s, _ := tempStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 30 transactions of 100 writes: more than one batch of the watcher.
	for i := 0; i < 30; i++ {
		if _, err := s.Update(ctx, func(tx *Tx) error {
			for j := 0; j < 100; j++ {
				if _, err := tx.Create(fmt.Sprintf("/k/%02d/%03d", i, j), []byte("v")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Events() // the watcher has read its first batch and waits for us
	if err := s.Compact(ctx, 30); err != nil {
		t.Fatal(err)
	}
	n := 1
	for range w.Events() {
		n++
	}
	if !errors.Is(w.Err(), ErrCompacted) {
		t.Fatalf("Err: %v, want ErrCompacted", w.Err())
	}
	if n >= 3000 {
		t.Errorf("received all %d events despite the compaction", n)
	}
	t.Logf("received %d of 3000 events, then: %v", n, w.Err())
}

// inotifyInstances counts this process's inotify file descriptors.
func inotifyInstances(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// TestStore_Watch_OneInotifyInstance: twenty watchers of one Store share
// one inotify instance (the kernel allows a user 128 by default, and
// containerd's CRI plugin needs some), each still woken by another
// process's writes; the instance is closed when the last watcher ends.
func TestStore_Watch_OneInotifyInstance(t *testing.T) {
	s, path := tempStore(t)
	before := inotifyInstances(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watchers, n = 20, 5
	ws := make([]*Watcher, watchers)
	for i := range ws {
		w, err := s.Watch(ctx, "/registry/", 0)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	deadline := time.Now().Add(10 * time.Second)
	for inotifyInstances(t)-before != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := inotifyInstances(t) - before; got != 1 {
		t.Fatalf("%d watchers hold %d inotify instances, want 1", watchers, got)
	}
	cmd, out := helper(t, "script", path, strconv.Itoa(n))
	for out.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var want []Event
	for _, step := range writeScript(n) {
		want = append(want, step.want...)
	}
	for _, w := range ws {
		checkEvents(t, collect(t, w, len(want)), want)
	}
	cancel()
	for _, w := range ws {
		for range w.Events() {
		}
	}
	if got := inotifyInstances(t) - before; got != 0 {
		t.Errorf("%d inotify instances left after every watcher ended, want 0", got)
	}
}

// A watch from a revision the store has not reached fails at once with
// ErrBadRevision, as etcd answers it ("mvcc: required revision is a future
// revision"), rather than waiting for revisions that may never come (a
// client of another store, or of this one before it was restored).
func TestStore_Watch_FutureRevision(t *testing.T) {
	s, _ := tempStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev, err := s.Update(ctx, create("/w/a", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(ctx, "/w/", rev+10); !errors.Is(err, ErrBadRevision) {
		t.Errorf("Watch from revision %d at revision %d: %v, want ErrBadRevision", rev+10, rev, err)
	}
	if _, err := s.Watch(ctx, "/w/", rev); err != nil { // the current revision: fine
		t.Errorf("Watch from the current revision %d: %v", rev, err)
	}
}
