package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// checkLayout checks the file's invariants: every key's entry points at a
// record of its own key; the records up to the compacted revision are
// the live keys' current values, and the values a write after it
// replaced (the state at the compacted revision); Events counts the
// records after it.
func checkLayout(t *testing.T, s *Store) {
	t.Helper()
	err := s.View(context.Background(), func(tx *Tx) error {
		current := map[string]string{} // revKey -> key
		c := tx.keys.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			kr, err := decodeKeyRecord(string(k), v)
			if err != nil {
				return err
			}
			if _, err := tx.valueOf(string(k), kr, nil); err != nil {
				return err
			}
			current[string(revKey(kr.mod, kr.sub))] = string(k)
		}
		replacedLater := map[string]bool{} // revKey -> replaced by a write after the compacted revision
		rc := tx.revs.Cursor()
		for k, v := rc.Seek(revKey(tx.compacted+1, 0)); k != nil; k, v = rc.Next() {
			if rec, ok := parseRecord(v); ok && rec.typ != Added {
				replacedLater[string(revKey(rec.prevRev, rec.prevSub))] = true
			}
		}
		var after int64
		for k, v := rc.First(); k != nil; k, v = rc.Next() {
			rec, ok := parseRecord(v)
			if !ok {
				return fmt.Errorf("record at revision %d does not parse", revisionOf(k))
			}
			if revisionOf(k) > tx.compacted {
				after++
			} else if current[string(k)] != string(rec.key) && !replacedLater[string(k)] {
				t.Errorf("the %s record of %s at revision %d is at or before the compacted revision %d, but not the key's value",
					rec.typ, rec.key, revisionOf(k), tx.compacted)
			}
		}
		if after != tx.Events() {
			t.Errorf("%d records after the compacted revision %d, Events says %d", after, tx.compacted, tx.Events())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recordsOf returns the revisions of the records of key in revs.
func recordsOf(t *testing.T, s *Store, key string) []int64 {
	t.Helper()
	var revs []int64
	if err := s.View(context.Background(), func(tx *Tx) error {
		c := tx.revs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if rec, ok := parseRecord(v); ok && string(rec.key) == key {
				revs = append(revs, revisionOf(k))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return revs
}

// update runs fns, one transaction each, and returns the last revision.
func update(t *testing.T, s *Store, fns ...func(*Tx) error) int64 {
	t.Helper()
	var rev int64
	for _, fn := range fns {
		var err error
		if rev, err = s.Update(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	return rev
}

// TestTx_Compact_KeepsCurrentValues: a key written long ago keeps its value
// after compaction passes its revision, whether an explicit Compact or the
// history limit compacts.
func TestTx_Compact_KeepsCurrentValues(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		compact bool // compact explicitly to the current revision
	}{
		{"explicit", nil, true},
		{"automatic", []Option{WithHistory(10)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := tempStore(t, tt.opts...)
			ctx := context.Background()
			update(t, s, create("/old", "written at 1"))
			for i := 0; i < 50; i++ {
				update(t, s, create(fmt.Sprintf("/k/%02d", i), "v"), put(fmt.Sprintf("/k/%02d", i), "w", 0))
			}
			if tt.compact {
				if err := s.Compact(ctx, 101); err != nil {
					t.Fatal(err)
				}
			}
			var compacted int64
			s.View(ctx, func(tx *Tx) error { compacted = tx.CompactedRevision(); return nil })
			if compacted < 2 {
				t.Fatalf("compacted up to %d: the test needs compaction past revision 1", compacted)
			}
			kv, ok := get(t, s, "/old")
			if !ok || string(kv.Value) != "written at 1" || kv.ModRevision != 1 || kv.Version != 1 {
				t.Fatalf("/old after compacting up to %d: %+v %v, want its value from revision 1", compacted, kv, ok)
			}
			// The replaced values of /k/* are history: only their last stays.
			if got := recordsOf(t, s, "/k/00"); len(got) != 1 || got[0] != 3 {
				t.Errorf("/k/00 has records at %v, want only its value at revision 3", got)
			}
			var n int
			if err := s.View(ctx, func(tx *Tx) error {
				return tx.ForEach("/k/", func(kv KV) error {
					if string(kv.Value) != "w" {
						t.Errorf("%s = %q after compaction, want w", kv.Key, kv.Value)
					}
					n++
					return nil
				})
			}); err != nil || n != 50 {
				t.Fatalf("listed %d keys, %v; want 50", n, err)
			}
			checkLayout(t, s)

			// Replacing the old value keeps its record, the key's value at
			// the compacted revision (a list at that revision reads it),
			// until compaction passes the update.
			rev := update(t, s, put("/old", "new", 1))
			if got := recordsOf(t, s, "/old"); len(got) != 2 || got[0] != 1 || got[1] != rev {
				t.Errorf("/old has records at %v after its update at %d, want 1 and %d", got, rev, rev)
			}
			checkLayout(t, s)
			if err := s.Compact(ctx, rev); err != nil {
				t.Fatal(err)
			}
			if got := recordsOf(t, s, "/old"); len(got) != 1 || got[0] != rev {
				t.Errorf("/old has records at %v after compacting past its update at %d, want only that one", got, rev)
			}
			if kv, _ := get(t, s, "/old"); string(kv.Value) != "new" || kv.Version != 2 || kv.CreateRevision != 1 {
				t.Errorf("/old after the update: %+v", kv)
			}
			checkLayout(t, s)
		})
	}
}

// TestTx_Compact_RemovesDeletedKeys: compaction removes every record of a
// deleted key, its deletion included, and of a key's earlier life.
func TestTx_Compact_RemovesDeletedKeys(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	rev := update(t, s,
		create("/gone", "1"), put("/gone", "2", 0), del("/gone", 0), // 1-3
		create("/again", "first life"), del("/again", 0), create("/again", "second life"), // 4-6
		create("/kept", "k")) // 7
	if got := recordsOf(t, s, "/gone"); len(got) != 3 {
		t.Fatalf("before compaction /gone has records at %v, want 3", got)
	}
	var removed int
	if _, err := s.Update(ctx, func(tx *Tx) error {
		var err error
		removed, err = tx.Compact(rev)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if removed != 7 {
		t.Errorf("Compact removed %d events, want 7", removed)
	}
	tests := []struct {
		key  string
		want []int64
	}{
		{"/gone", nil},
		{"/again", []int64{6}},
		{"/kept", []int64{7}},
	}
	for _, tt := range tests {
		if got := recordsOf(t, s, tt.key); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: records at %v after compaction, want %v", tt.key, got, tt.want)
		}
	}
	if kv, ok := get(t, s, "/again"); !ok || string(kv.Value) != "second life" || kv.CreateRevision != 6 {
		t.Errorf("/again: %+v %v", kv, ok)
	}
	checkLayout(t, s)
}

// TestStore_Watch_DeletedCarriesLastValue: a DELETED event has the deleted
// object, even when the revision that wrote it was compacted; a MODIFIED
// event's PrevKV is there too, until compaction passes the event.
func TestStore_Watch_DeletedCarriesLastValue(t *testing.T) {
	s, _ := tempStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	update(t, s, create("/w/a", "1"), put("/w/a", "2", 0), create("/w/m", "a")) // 1-3
	if err := s.Compact(ctx, 3); err != nil {
		t.Fatal(err)
	}
	update(t, s, del("/w/a", 2), put("/w/m", "b", 3), put("/w/m", "c", 5)) // 4-6
	w, err := s.Watch(ctx, "/w/", 3)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, w, 3)
	tests := []struct {
		name       string
		ev         Event
		want       KV
		wantPrev   *KV
		wantTypeOf EventType
	}{
		{"deleted after its value's revision was compacted", got[0],
			KV{Key: "/w/a", Value: []byte("2"), CreateRevision: 1, ModRevision: 4, Version: 2},
			&KV{Key: "/w/a", Value: []byte("2"), CreateRevision: 1, ModRevision: 2, Version: 2}, Deleted},
		{"modified, previous revision compacted (its value kept, as the state at the compacted revision)", got[1],
			KV{Key: "/w/m", Value: []byte("b"), CreateRevision: 3, ModRevision: 5, Version: 2},
			&KV{Key: "/w/m", Value: []byte("a"), CreateRevision: 3, ModRevision: 3, Version: 1}, Modified},
		{"modified, previous revision in the history", got[2],
			KV{Key: "/w/m", Value: []byte("c"), CreateRevision: 3, ModRevision: 6, Version: 3},
			&KV{Key: "/w/m", Value: []byte("b"), CreateRevision: 3, ModRevision: 5, Version: 2}, Modified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ev.Type != tt.wantTypeOf || fmt.Sprint(tt.ev.KV) != fmt.Sprint(tt.want) {
				t.Errorf("%s %+v, want %s %+v", tt.ev.Type, tt.ev.KV, tt.wantTypeOf, tt.want)
			}
			switch {
			case tt.wantPrev == nil && tt.ev.PrevKV != nil:
				t.Errorf("PrevKV %+v, want nil", *tt.ev.PrevKV)
			case tt.wantPrev != nil && (tt.ev.PrevKV == nil || fmt.Sprint(*tt.ev.PrevKV) != fmt.Sprint(*tt.wantPrev)):
				t.Errorf("PrevKV %v, want %+v", tt.ev.PrevKV, *tt.wantPrev)
			}
		})
	}
	if err := s.Compact(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if got := recordsOf(t, s, "/w/a"); got != nil {
		t.Errorf("/w/a (deleted) has records at %v after compaction", got)
	}
	checkLayout(t, s)
}

// TestStore_Open_RefusesOtherLayouts: a podlab store in another layout
// fails with ErrLayout, and is left as it was.
func TestStore_Open_RefusesOtherLayouts(t *testing.T) {
	tests := []struct {
		name    string
		format  string
		buckets []string
		want    error // nil: any error
	}{
		{"layout 1: values in keys and in a log", "podlab-store/1", []string{"keys", "log"}, ErrLayout},
		{"layout 2: the index and the records in two buckets", "podlab-store/2", []string{"keys", "revs"}, ErrLayout},
		{"a layout from a later podlab", "podlab-store/4", []string{"kv"}, ErrLayout},
		{"another program's meta bucket", "something else", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(btx *bolt.Tx) error {
				m, err := btx.CreateBucket(metaBucket)
				if err != nil {
					return err
				}
				for _, b := range tt.buckets {
					if _, err := btx.CreateBucket([]byte(b)); err != nil {
						return err
					}
				}
				if err := m.Put(metaRevision, binary.BigEndian.AppendUint64(nil, 7)); err != nil {
					return err
				}
				return m.Put(metaFormat, []byte(tt.format))
			}); err != nil {
				t.Fatal(err)
			}
			db.Close()
			err = openErr(path)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			t.Log(err)
			db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.View(func(btx *bolt.Tx) error {
				var names []string
				btx.ForEach(func(name []byte, _ *bolt.Bucket) error { names = append(names, string(name)); return nil })
				if f := string(btx.Bucket(metaBucket).Get(metaFormat)); f != tt.format || len(names) != len(tt.buckets)+1 {
					t.Errorf("Open changed the file: format %q, buckets %v", f, names)
				}
				return nil
			})
		})
	}
}

// TestTx_Compact_ThenWriteInOneTransaction: writes after a Compact to the
// transaction's own revision keep the layout's invariants.
func TestTx_Compact_ThenWriteInOneTransaction(t *testing.T) {
	s, _ := tempStore(t)
	update(t, s, create("/a", "1"), create("/b", "1"))
	update(t, s, func(tx *Tx) error {
		for _, fn := range []func(*Tx) error{create("/c", "1"), put("/a", "2", 0)} {
			if err := fn(tx); err != nil {
				return err
			}
		}
		if _, err := tx.Compact(tx.Revision()); err != nil {
			return err
		}
		for _, fn := range []func(*Tx) error{put("/a", "3", 0), del("/b", 0), put("/c", "2", 0)} {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	checkLayout(t, s)
	for key, want := range map[string]string{"/a": "3", "/c": "2"} {
		if kv, ok := get(t, s, key); !ok || string(kv.Value) != want {
			t.Errorf("%s = %+v %v, want %q", key, kv, ok, want)
		}
	}
	if got := recordsOf(t, s, "/b"); got != nil {
		t.Errorf("/b (deleted) has records at %v", got)
	}
}

// TestStore_Layout_OneTree: the file holds the buckets kv and meta, meta inline
// (it costs no page of its own), and kv only keys of its two keyspaces;
// the index's cursors stop where the records start, and the other way
// round.
func TestStore_Layout_OneTree(t *testing.T) {
	s, _ := tempStore(t)
	ctx := context.Background()
	update(t, s, create("/a", "1"), create("/b", "1"), put("/a", "2", 0), del("/b", 0), create("/c", "1"))
	err := s.View(ctx, func(tx *Tx) error {
		var names []string
		tx.btx.ForEach(func(name []byte, _ *bolt.Bucket) error { names = append(names, string(name)); return nil })
		if fmt.Sprint(names) != "[kv meta]" {
			t.Errorf("top-level buckets %v, want [kv meta]", names)
		}
		if st := tx.meta.Stats(); st.InlineBucketN != 1 {
			t.Errorf("meta is not inline: %+v", st)
		}
		count := map[byte]int{}
		c := tx.btx.Bucket(kvBucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			count[k[0]]++
		}
		if count[keysPrefix] != 2 || count[revsPrefix] != 5 || len(count) != 2 {
			t.Errorf("kv holds keys by first byte %v, want 2 'k' (/a, /c) and 5 'r'", count)
		}
		var keys []string
		kc := tx.keys.Cursor()
		for k, _ := kc.First(); k != nil; k, _ = kc.Next() {
			keys = append(keys, string(k))
		}
		if k, _ := kc.Seek([]byte("/z")); k != nil {
			t.Errorf("the index's cursor sought past its last key found %q", k)
		}
		var revs []int64
		rc := tx.revs.Cursor()
		for k, _ := rc.First(); k != nil; k, _ = rc.Next() {
			revs = append(revs, revisionOf(k))
		}
		if fmt.Sprint(keys) != "[/a /c]" || fmt.Sprint(revs) != "[1 2 3 4 5]" {
			t.Errorf("keys %v, records at %v; want [/a /c] and [1 2 3 4 5]", keys, revs)
		}
		if n, max, err := tx.Stat("/"); err != nil || n != 2 || max != 5 {
			t.Errorf("Stat(/) = %d, %d, %v; want 2, 5", n, max, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
