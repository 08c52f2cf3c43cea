package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
)

// etcdStore opens a store in a real etcd, started for this test.
func etcdStore(t *testing.T) (*Store, *testenv.EtcdProcess) {
	t.Helper()
	e := testenv.Etcd(t)
	s, err := OpenEtcd(context.Background(), EtcdConfig{Endpoints: []string{e.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, e
}

func TestEtcd_Update_RevisionsConflictsAndReadYourWrites(t *testing.T) {
	s, _ := etcdStore(t)
	ctx := context.Background()
	var predicted, committed int64
	rev1, err := s.Update(ctx, func(tx *Tx) error {
		kv, err := tx.Create("/registry/pods/default/web", []byte("v1"))
		if err != nil {
			return err
		}
		predicted = kv.ModRevision
		if _, err := tx.Create("/registry/pods/default/db", []byte("d1")); err != nil {
			return err
		}
		// This transaction's own writes are visible to it.
		if got, ok, err := tx.Get("/registry/pods/default/web"); err != nil || !ok || string(got.Value) != "v1" {
			return fmt.Errorf("read-your-writes: %v %v %q", err, ok, got.Value)
		}
		n := 0
		if err := tx.ForEach("/registry/pods/", func(KV) error { n++; return nil }); err != nil || n != 2 {
			return fmt.Errorf("ForEach sees %d keys (%v), want 2", n, err)
		}
		tx.OnCommit(func(rev int64) { committed = rev })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if committed != rev1 || predicted != rev1 {
		t.Errorf("both writes of one transaction get revision %d; OnCommit got %d, Create predicted %d", rev1, committed, predicted)
	}
	var kv KV
	if err := s.View(ctx, func(tx *Tx) error {
		var ok bool
		kv, ok, err = tx.Get("/registry/pods/default/db")
		if !ok {
			return errors.New("db is missing")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if kv.CreateRevision != rev1 || kv.ModRevision != rev1 || kv.Version != 1 {
		t.Errorf("db: %+v, want create=mod=%d version=1", kv, rev1)
	}

	tests := []struct {
		name string
		fn   func(tx *Tx) error
		want error
	}{
		{"create existing", func(tx *Tx) error { _, err := tx.Create("/registry/pods/default/web", []byte("x")); return err }, ErrExists},
		{"put stale revision", func(tx *Tx) error { _, err := tx.Put("/registry/pods/default/web", []byte("x"), rev1-1); return err }, ErrConflict},
		{"put missing", func(tx *Tx) error { _, err := tx.Put("/registry/pods/default/nope", []byte("x"), 0); return err }, ErrNotFound},
		{"delete stale revision", func(tx *Tx) error { _, err := tx.Delete("/registry/pods/default/web", rev1+5); return err }, ErrConflict},
		{"key outside /registry", func(tx *Tx) error { _, err := tx.Create("/elsewhere/x", []byte("x")); return err }, ErrBadKey},
		{"nil value", func(tx *Tx) error { _, err := tx.Create("/registry/pods/default/n", nil); return err }, ErrBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Update(ctx, tt.fn)
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	if err := s.View(ctx, func(tx *Tx) error {
		_, err := tx.Create("/registry/pods/default/ro", []byte("x"))
		return err
	}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("a write in View: %v, want ErrReadOnly", err)
	}
	// A failed transaction writes nothing.
	if _, err := s.Update(ctx, func(tx *Tx) error {
		if _, err := tx.Create("/registry/pods/default/half", []byte("x")); err != nil {
			return err
		}
		return errors.New("changed my mind")
	}); err == nil {
		t.Fatal("the failing transaction succeeded")
	}
	if rev, _ := s.Revision(ctx); rev != rev1 {
		t.Errorf("after failed transactions the revision is %d, want %d", rev, rev1)
	}
}

// Eight writers add one to the same key: etcd's compare on mod_revision
// makes each read-modify-write start again when another came first, so no
// increment is lost.
func TestEtcd_Update_ConcurrentWritersLoseNothing(t *testing.T) {
	s, _ := etcdStore(t)
	ctx := context.Background()
	const key = "/registry/configmaps/default/counter"
	if _, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create(key, []byte("0")); return err }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				_, err := s.Update(ctx, func(tx *Tx) error {
					kv, _, err := tx.Get(key)
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(kv.Value))
					_, err = tx.Put(key, []byte(strconv.Itoa(n+1)), kv.ModRevision)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.View(ctx, func(tx *Tx) error {
		kv, _, _ := tx.Get(key)
		if string(kv.Value) != "80" || kv.Version != 81 {
			t.Errorf("counter = %s, version %d; want 80, version 81", kv.Value, kv.Version)
		}
		return nil
	})
}

func TestEtcd_WatchPagingAndCompaction(t *testing.T) {
	s, _ := etcdStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	revA, _ := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create("/registry/pods/ns/a", []byte("a1")); return err })
	revB, _ := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create("/registry/pods/ns/b", []byte("b1")); return err })
	revM, _ := s.Update(ctx, func(tx *Tx) error { _, err := tx.Put("/registry/pods/ns/a", []byte("a2"), revA); return err })
	revD, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Delete("/registry/pods/ns/b", 0); return err })
	if err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(ctx, "/registry/pods/", start)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ      EventType
		key, val string
		rev      int64
		prev     string
	}{
		{Added, "/registry/pods/ns/a", "a1", revA, ""},
		{Added, "/registry/pods/ns/b", "b1", revB, ""},
		{Modified, "/registry/pods/ns/a", "a2", revM, "a1"},
		{Deleted, "/registry/pods/ns/b", "b1", revD, "b1"},
	}
	for i, wt := range want {
		ev := <-w.Events()
		prev := ""
		if ev.PrevKV != nil {
			prev = string(ev.PrevKV.Value)
		}
		if ev.Type != wt.typ || ev.KV.Key != wt.key || string(ev.KV.Value) != wt.val || ev.Revision != wt.rev || ev.KV.ModRevision != wt.rev || prev != wt.prev {
			t.Errorf("event %d: %s %s=%q rev %d (kv mod %d) prev %q; want %s %s=%q rev %d prev %q",
				i, ev.Type, ev.KV.Key, ev.KV.Value, ev.Revision, ev.KV.ModRevision, prev, wt.typ, wt.key, wt.val, wt.rev, wt.prev)
		}
	}

	// Reading the past: the state at revB, then from a key on (a page).
	read := func(from string, rev int64) (string, error) {
		out := ""
		err := s.View(ctx, func(tx *Tx) error {
			return tx.ForEachAt("/registry/pods/", from, rev, func(kv KV) error {
				out += fmt.Sprintf("%s=%s@%d ", kv.Key[len("/registry/pods/"):], kv.Value, kv.ModRevision)
				return nil
			})
		})
		return out, err
	}
	if got, err := read("", revB); err != nil || got != fmt.Sprintf("ns/a=a1@%d ns/b=b1@%d ", revA, revB) {
		t.Errorf("at revision %d: %q, %v", revB, got, err)
	}
	if got, err := read("/registry/pods/ns/b", revB); err != nil || got != fmt.Sprintf("ns/b=b1@%d ", revB) {
		t.Errorf("from ns/b at revision %d: %q, %v", revB, got, err)
	}
	if _, err := read("", revD+100); !errors.Is(err, ErrBadRevision) {
		t.Errorf("a future revision: %v, want ErrBadRevision", err)
	}

	// After compaction: the past before it is gone, for reads and watches.
	if err := s.Compact(ctx, revM); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, revM); err != nil {
		t.Errorf("compacting again to the same revision: %v, want nil", err)
	}
	if _, err := read("", revB); !errors.Is(err, ErrCompacted) {
		t.Errorf("reading at a compacted revision: %v, want ErrCompacted", err)
	}
	w2, err := s.Watch(ctx, "/registry/pods/", start)
	if err == nil {
		for range w2.Events() {
		}
		err = w2.Err()
	}
	if !errors.Is(err, ErrCompacted) {
		t.Errorf("watching from a compacted revision: %v, want ErrCompacted", err)
	}
}

func TestOpenEtcd_BadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  EtcdConfig
		want string
	}{
		{"no endpoints", EtcdConfig{}, "no endpoints"},
		{"not a URL", EtcdConfig{Endpoints: []string{"127.0.0.1:2379"}}, "not a URL"},
		{"prefix without slash", EtcdConfig{Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "registry"}, "must start with /"},
		{"nobody there", EtcdConfig{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond}, "not answering"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenEtcd(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// What Prefetch read is what the transaction reads, at its snapshot, and
// the commit still checks it: a write to a prefetched key between the read
// and the commit makes the transaction run again, on the new value.
func TestEtcd_Prefetch(t *testing.T) {
	s, _ := etcdStore(t)
	ctx := context.Background()
	const ns, lr = "/registry/namespaces/default", "/registry/limitranges/default/"
	if _, err := s.Update(ctx, func(tx *Tx) error {
		if _, err := tx.Create(ns, []byte("ns1")); err != nil {
			return err
		}
		_, err := tx.Create(lr+"a", []byte("lr-a"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	var seen []string
	_, err := s.Update(ctx, func(tx *Tx) error {
		runs++
		if err := tx.Prefetch([]string{ns, "/registry/namespaces/none"}, []string{lr}); err != nil {
			return err
		}
		if runs == 1 { // another client writes the namespace after the prefetch
			if _, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Put(ns, []byte("ns2"), 0); return err }); err != nil {
				return err
			}
		}
		kv, ok, err := tx.Get(ns)
		if err != nil || !ok {
			return fmt.Errorf("get %s: %v %v", ns, ok, err)
		}
		if _, ok, _ := tx.Get("/registry/namespaces/none"); ok {
			return errors.New("a key that does not exist was found")
		}
		if _, err := tx.Create(lr+"b", []byte("lr-b")); err != nil {
			return err
		}
		list, err := tx.List(lr)
		if err != nil {
			return err
		}
		seen = append(seen, fmt.Sprintf("%s:%d", kv.Value, len(list)))
		_, err = tx.Create("/registry/pods/default/p", kv.Value)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 || strings.Join(seen, " ") != "ns1:2 ns2:2" {
		t.Errorf("ran %d times, saw %v; want 2 runs: ns1 then (after the other write) ns2, each with both limit ranges", runs, seen)
	}
	s.View(ctx, func(tx *Tx) error {
		kv, _, _ := tx.Get("/registry/pods/default/p")
		if string(kv.Value) != "ns2" {
			t.Errorf("the pod was written from %q, want ns2 (the namespace as committed)", kv.Value)
		}
		return nil
	})
}
