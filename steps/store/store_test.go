package store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func create(key, value string) func(tx *Tx) error {
	return func(tx *Tx) error { _, err := tx.Create(key, []byte(value)); return err }
}

func put(key, value string, expect int64) func(tx *Tx) error {
	return func(tx *Tx) error { _, err := tx.Put(key, []byte(value), expect); return err }
}

func del(key string, expect int64) func(tx *Tx) error {
	return func(tx *Tx) error { _, err := tx.Delete(key, expect); return err }
}

func get(t *testing.T, s *Store, key string) (KV, bool) {
	t.Helper()
	var kv KV
	var ok bool
	if err := s.View(context.Background(), func(tx *Tx) error {
		var err error
		kv, ok, err = tx.Get(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return kv, ok
}

func TestStore_Update_RevisionsAndVersions(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	if rev, err := s.Revision(ctx); err != nil || rev != 0 {
		t.Fatalf("empty store: revision %d, %v; want 0", rev, err)
	}
	steps := []struct {
		name    string
		fn      func(tx *Tx) error
		wantRev int64
		key     string
		want    *KV // nil: the key must be absent
	}{
		{"create a", create("/a", "1"), 1, "/a", &KV{Value: []byte("1"), CreateRevision: 1, ModRevision: 1, Version: 1}},
		{"create b", create("/b", "1"), 2, "/b", &KV{Value: []byte("1"), CreateRevision: 2, ModRevision: 2, Version: 1}},
		{"put a unconditionally", put("/a", "2", 0), 3, "/a", &KV{Value: []byte("2"), CreateRevision: 1, ModRevision: 3, Version: 2}},
		{"put a expecting its mod_revision", put("/a", "3", 3), 4, "/a", &KV{Value: []byte("3"), CreateRevision: 1, ModRevision: 4, Version: 3}},
		{"read only: no new revision", func(tx *Tx) error { _, _, err := tx.Get("/a"); return err }, 4, "/a", &KV{Value: []byte("3"), CreateRevision: 1, ModRevision: 4, Version: 3}},
		{"empty value", put("/a", "", 0), 5, "/a", &KV{Value: []byte{}, CreateRevision: 1, ModRevision: 5, Version: 4}},
		{"delete b expecting its mod_revision", del("/b", 2), 6, "/b", nil},
		{"create b again: a new life", create("/b", "x"), 7, "/b", &KV{Value: []byte("x"), CreateRevision: 7, ModRevision: 7, Version: 1}},
	}
	for _, st := range steps {
		rev, err := s.Update(ctx, st.fn)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if rev != st.wantRev {
			t.Errorf("%s: revision %d, want %d", st.name, rev, st.wantRev)
		}
		kv, ok := get(t, s, st.key)
		switch {
		case st.want == nil && ok:
			t.Errorf("%s: %s still there: %+v", st.name, st.key, kv)
		case st.want != nil && !ok:
			t.Errorf("%s: %s missing", st.name, st.key)
		case st.want != nil:
			want := *st.want
			want.Key = st.key
			if kv.Key != want.Key || !bytes.Equal(kv.Value, want.Value) || kv.CreateRevision != want.CreateRevision ||
				kv.ModRevision != want.ModRevision || kv.Version != want.Version {
				t.Errorf("%s: got %+v, want %+v", st.name, kv, want)
			}
		}
	}
}

func TestTx_Errors(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	// /a: created at 1, replaced at 2.
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, put("/a", "2", 1)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		fn   func(tx *Tx) error
		want error
	}{
		{"create an existing key", create("/a", "x"), ErrExists},
		{"put with a stale mod_revision", put("/a", "x", 1), ErrConflict},
		{"put a missing key", put("/missing", "x", 0), ErrNotFound},
		{"delete with a stale mod_revision", del("/a", 1), ErrConflict},
		{"delete a missing key", del("/missing", 0), ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev, err := s.Update(ctx, tt.fn)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if rev != 0 {
				t.Errorf("a failed Update returned revision %d", rev)
			}
			if now, _ := s.Revision(ctx); now != 2 {
				t.Errorf("the revision moved to %d", now)
			}
			if kv, _ := get(t, s, "/a"); string(kv.Value) != "2" || kv.ModRevision != 2 {
				t.Errorf("/a changed: %+v", kv)
			}
		})
	}
}

func TestStore_Update_OneRevisionPerTransaction(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/x/0", "before")); err != nil {
		t.Fatal(err)
	}
	var inside []int64
	var written []string
	rev, err := s.Update(ctx, func(tx *Tx) error {
		inside = append(inside, tx.Revision())
		if len(tx.Written()) != 0 {
			t.Errorf("a new transaction has written %v", tx.Written())
		}
		for _, fn := range []func(*Tx) error{create("/x/1", "a"), create("/x/2", "b"), put("/x/1", "c", 0), del("/x/0", 1)} {
			if err := fn(tx); err != nil {
				return err
			}
			inside = append(inside, tx.Revision())
		}
		written = slices.Clone(tx.Written())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
	if want := []int64{1, 2, 2, 2, 2}; !slices.Equal(inside, want) {
		t.Errorf("tx.Revision inside: %v, want %v", inside, want)
	}
	if want := []string{"/x/1", "/x/2", "/x/1", "/x/0"}; !slices.Equal(written, want) {
		t.Errorf("tx.Written: %v, want %v", written, want)
	}
	x1, _ := get(t, s, "/x/1")
	if x1.CreateRevision != 2 || x1.ModRevision != 2 || x1.Version != 2 || string(x1.Value) != "c" {
		t.Errorf("/x/1 = %+v, want created and modified at 2, version 2, value c", x1)
	}
	evs, upTo, _, err := s.readLog(ctx, "/", 1, watchBatch)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []EventType{Added, Added, Modified, Deleted}
	if len(evs) != len(wantTypes) || upTo != 2 {
		t.Fatalf("log after 1: %d events up to %d, want %d up to 2", len(evs), upTo, len(wantTypes))
	}
	for i, ev := range evs {
		if ev.Revision != 2 || ev.Type != wantTypes[i] {
			t.Errorf("event %d: %s at %d, want %s at 2", i, ev.Type, ev.Revision, wantTypes[i])
		}
	}
	if d := evs[3]; d.PrevKV == nil || string(d.PrevKV.Value) != "before" || string(d.KV.Value) != "before" || d.KV.ModRevision != 2 {
		t.Errorf("DELETED event: %+v, want the last value with mod_revision 2", d)
	}
	if m := evs[2]; m.PrevKV == nil || string(m.PrevKV.Value) != "a" || string(m.KV.Value) != "c" {
		t.Errorf("MODIFIED event: %+v, want a -> c", m)
	}
}

func TestStore_Update_RollbackOnError(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/kept", "1")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := s.Update(ctx, func(tx *Tx) error {
		for _, fn := range []func(*Tx) error{create("/r/1", "a"), create("/r/2", "b"), put("/kept", "changed", 0)} {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want fn's error", err)
	}
	if rev, _ := s.Revision(ctx); rev != 1 {
		t.Errorf("revision %d after a rolled back Update, want 1", rev)
	}
	for _, k := range []string{"/r/1", "/r/2"} {
		if _, ok := get(t, s, k); ok {
			t.Errorf("%s was stored by a rolled back Update", k)
		}
	}
	if kv, _ := get(t, s, "/kept"); string(kv.Value) != "1" {
		t.Errorf("/kept = %q, want 1", kv.Value)
	}
	evs, _, _, err := s.readLog(ctx, "/", 0, watchBatch)
	if err != nil || len(evs) != 1 {
		t.Errorf("log: %d events, %v; want only the first create", len(evs), err)
	}
	if rev, err := s.Update(ctx, create("/next", "1")); err != nil || rev != 2 {
		t.Errorf("next write: revision %d, %v; want 2", rev, err)
	}
}

func TestStore_View_ReadOnly(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	writes := []struct {
		name string
		fn   func(tx *Tx) error
	}{
		{"create", create("/b", "1")},
		{"put", put("/a", "2", 0)},
		{"delete", del("/a", 0)},
		{"compact", func(tx *Tx) error { _, err := tx.Compact(1); return err }},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			if err := s.View(ctx, w.fn); !errors.Is(err, ErrReadOnly) {
				t.Errorf("got %v, want ErrReadOnly", err)
			}
		})
	}
}

func TestTx_List(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	for _, k := range []string{"/registry/pods/b/2", "/registry/pods/a/1", "/registry/podsx/a", "/registry/pods/a/0", "/other"} {
		if _, err := s.Update(ctx, create(k, k)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"/registry/pods/", []string{"/registry/pods/a/0", "/registry/pods/a/1", "/registry/pods/b/2"}},
		{"/registry/pods/a/", []string{"/registry/pods/a/0", "/registry/pods/a/1"}},
		{"/registry/pods/c/", nil},
		{"/", []string{"/other", "/registry/pods/a/0", "/registry/pods/a/1", "/registry/pods/b/2", "/registry/podsx/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			var got []string
			if err := s.View(ctx, func(tx *Tx) error {
				kvs, err := tx.List(tt.prefix)
				for _, kv := range kvs {
					if string(kv.Value) != kv.Key {
						t.Errorf("%s has value %q", kv.Key, kv.Value)
					}
					got = append(got, kv.Key)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStore_BadInputs(t *testing.T) {
	s, path := tempStore(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	update := func(fn func(tx *Tx) error) error { _, err := s.Update(ctx, fn); return err }
	watch := func(ctx context.Context, prefix string, rev int64) error {
		_, err := s.Watch(ctx, prefix, rev)
		return err
	}
	tests := []struct {
		name string
		err  error
		want error // nil: any error
	}{
		{"create an empty key", update(create("", "1")), ErrBadKey},
		{"create a key without /", update(create("a/b", "1")), ErrBadKey},
		{"create a key of bbolt's largest size (the index adds a byte)", update(create("/"+strings.Repeat("k", bolt.MaxKeySize-1), "1")), ErrBadKey},
		{"create a nil value", update(func(tx *Tx) error { _, err := tx.Create("/n", nil); return err }), ErrBadKey},
		{"put a nil value", update(func(tx *Tx) error { _, err := tx.Put("/a", nil, 0); return err }), ErrBadKey},
		{"put expecting a negative revision", update(put("/a", "1", -1)), ErrBadRevision},
		{"delete expecting a negative revision", update(del("/a", -3)), ErrBadRevision},
		{"get an empty key", s.View(ctx, func(tx *Tx) error { _, _, err := tx.Get(""); return err }), ErrBadKey},
		{"list a prefix without /", s.View(ctx, func(tx *Tx) error { _, err := tx.List("registry"); return err }), ErrBadKey},
		{"compact to a negative revision", s.Compact(ctx, -1), ErrBadRevision},
		{"compact to a future revision", s.Compact(ctx, 99), ErrBadRevision},
		{"watch with a cancelled context", watch(cancelled, "/", 0), context.Canceled},
		{"watch a prefix without /", watch(ctx, "pods", 0), ErrBadKey},
		{"watch from a negative revision", watch(ctx, "/", -1), ErrBadRevision},
		{"update with a cancelled context", func() error { _, err := s.Update(cancelled, create("/c", "1")); return err }(), context.Canceled},
		{"open with no path", openErr(""), nil},
		{"open keeping no history", openErr(path, WithHistory(0)), nil},
		{"open with no lock timeout", openErr(path, WithLockTimeout(0)), nil},
		{"open a missing store that must exist", openErr(filepath.Join(t.TempDir(), "none.db"), MustExist()), fs.ErrNotExist},
		{"open a directory", openErr(t.TempDir()), nil},
		{"open a file that is not bbolt", openErr(writeFile(t, "not bbolt at all, just text, long enough to be read")), nil},
		{"open a bbolt file that is not a store", openErr(otherBolt(t)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
			t.Log(tt.err)
		})
	}
	if rev, _ := s.Revision(ctx); rev != 1 {
		t.Errorf("bad inputs moved the revision to %d", rev)
	}
}

func TestStore_Close(t *testing.T) {
	s, _ := tempStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(context.Background(), create("/a", "1")); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
}

func TestStore_Open_Reopen(t *testing.T) {
	s, path := tempStore(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/a", "1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(path, MustExist())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if rev, err := s2.Update(ctx, create("/b", "1")); err != nil || rev != 2 {
		t.Errorf("write after reopening: revision %d, %v; want 2", rev, err)
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
}

func openErr(path string, opts ...Option) error {
	s, err := Open(path, opts...)
	if err == nil {
		s.Close()
	}
	return err
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "file.db")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func otherBolt(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	return p
}
