package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestWALRecord_RoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  walRecord
	}{
		{"no operations", walRecord{rev: 1}},
		{"a create", walRecord{rev: 7, ops: []walOp{
			{kind: opPutKV, key: []byte("r\x00\x00\x00\x00\x00\x00\x00\x07"), value: bytes.Repeat([]byte("v"), 500)},
			{kind: opPutKV, key: []byte("k/registry/pods/default/web"), value: []byte("counters")},
			{kind: opPutMeta, key: metaRevision, value: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
		}}},
		{"a delete and an empty value", walRecord{rev: 1 << 40, ops: []walOp{
			{kind: opDeleteKV, key: []byte("k/x")},
			{kind: opPutKV, key: []byte("k/y"), value: []byte{}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.rec.encode()
			got, n, ok := parseWALRecord(append(b, 0, 0, 0)) // and what follows it
			if !ok || n != len(b) {
				t.Fatalf("parse: ok %v, size %d of %d", ok, n, len(b))
			}
			if got.rev != tt.rec.rev || len(got.ops) != len(tt.rec.ops) {
				t.Fatalf("got revision %d with %d ops, want %d with %d", got.rev, len(got.ops), tt.rec.rev, len(tt.rec.ops))
			}
			for i, op := range got.ops {
				want := tt.rec.ops[i]
				if op.kind != want.kind || !bytes.Equal(op.key, want.key) || !bytes.Equal(op.value, want.value) {
					t.Errorf("op %d: %q %q %q, want %q %q %q", i, op.kind, op.key, op.value, want.kind, want.key, want.value)
				}
			}
		})
	}
}

// Whatever the bytes, parsing ends the log instead of failing or panicking.
func TestWALRecord_BadBytes(t *testing.T) {
	good := walRecord{rev: 3, ops: []walOp{{kind: opPutKV, key: []byte("k/a"), value: []byte("value")}}}.encode()
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	long := bytes.Clone(good)
	long[3] += 10 // the length runs past the end
	bogus := walRecord{rev: 3, ops: []walOp{{kind: opPutKV, key: []byte("k/a"), value: []byte("value")}}}.encode()
	bogus[walHeaderLen+1] = 0xff // a key length that runs past the record, with a right CRC:
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"zeros", make([]byte, 64)},
		{"torn", good[:len(good)-2]},
		{"a flipped bit", flipped},
		{"a length past the end", long},
		{"a header only", good[:walHeaderLen]},
		{"a field past the record", fixCRC(bogus)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, ok := parseWALRecord(tt.b); ok {
				t.Errorf("parsed %q as a record", tt.b)
			}
		})
	}
}

// fixCRC makes the CRC of the record b right again.
func fixCRC(b []byte) []byte {
	c := bytes.Clone(b)
	binary.BigEndian.PutUint32(c[4:], crc32.Checksum(c[8:binary.BigEndian.Uint32(c)], walCRC))
	return c
}

// An Update that fails after writing leaves the batch as it was: the
// earlier writes of the burst are there, its own are not.
func TestStore_Update_FailedWriteInABatch(t *testing.T) {
	s, _ := tempStore(t, WithLinger(time.Hour, time.Hour))
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/b/1", "one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := s.Update(ctx, func(tx *Tx) error {
		if _, err := tx.Create("/b/2", []byte("two")); err != nil {
			return err
		}
		if _, err := tx.Put("/b/1", []byte("changed"), 0); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}
	rev, err := s.Update(ctx, create("/b/3", "three"))
	if err != nil {
		t.Fatal(err)
	}
	if rev != 2 {
		t.Errorf("revision %d after a failed write, want 2", rev)
	}
	for key, want := range map[string]string{"/b/1": "one", "/b/3": "three"} {
		if kv, ok := get(t, s, key); !ok || string(kv.Value) != want {
			t.Errorf("%s = %q %v, want %q", key, kv.Value, ok, want)
		}
	}
	if _, ok := get(t, s, "/b/2"); ok {
		t.Error("/b/2 of the failed write is there")
	}
	// And after the commit, from the file.
	s.Close()
	s2, err := Open(s.Path(), MustExist())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if kv, ok := get(t, s2, "/b/1"); !ok || string(kv.Value) != "one" {
		t.Errorf("/b/1 after the commit: %q %v", kv.Value, ok)
	}
	if _, ok := get(t, s2, "/b/2"); ok {
		t.Error("/b/2 of the failed write is in the file")
	}
}

// A process that dies holding a batch leaves its writes in the WAL only;
// the next open, read-only or not, replays them, and records older than
// the file are skipped.
func TestStore_WALReplay(t *testing.T) {
	for _, reader := range []string{"View", "Update"} {
		t.Run(reader, func(t *testing.T) {
			s, path := tempStore(t, WithLinger(time.Hour, time.Hour))
			ctx := context.Background()
			for _, k := range []string{"/w/1", "/w/2"} {
				if _, err := s.Update(ctx, create(k, "v"+k)); err != nil {
					t.Fatal(err)
				}
			}
			// Die holding the batch: copy the file and its WAL as they are
			// now, as a crash would leave them.
			crashed := t.TempDir() + "/store.db"
			copyFile(t, path, crashed)
			copyFile(t, walPath(path), walPath(crashed))
			s.Close()

			raw, err := bolt.Open(crashed, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var inFile bool
			raw.View(func(btx *bolt.Tx) error {
				inFile = btx.Bucket(kvBucket).Get([]byte("k/w/1")) != nil
				return nil
			})
			raw.Close()
			if inFile {
				t.Fatal("the batch reached the file before the commit: the test shows nothing")
			}

			c, err := Open(crashed, MustExist())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got []string
			read := func(tx *Tx) error {
				kvs, err := tx.List("/w/")
				for _, kv := range kvs {
					got = append(got, kv.Key+"="+string(kv.Value))
				}
				return err
			}
			if reader == "View" {
				err = c.View(ctx, read)
			} else {
				_, err = c.Update(ctx, read)
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"/w/1=v/w/1", "/w/2=v/w/2"}; !slices.Equal(got, want) {
				t.Errorf("after the crash: %v, want %v", got, want)
			}
			rev, err := c.Update(ctx, create("/w/3", "three"))
			if err != nil || rev != 3 {
				t.Errorf("the next write: revision %d, %v; want 3", rev, err)
			}
		})
	}
}

// Records no newer than the file are old ones, committed before: a crash
// between a commit and the zeroing of the WAL replays nothing twice.
func TestStore_WALReplay_SkipsCommittedRecords(t *testing.T) {
	s, path := tempStore(t, WithLinger(time.Hour, time.Hour))
	ctx := context.Background()
	for _, k := range []string{"/w/1", "/w/2"} {
		if _, err := s.Update(ctx, create(k, "v")); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	copyFile(t, walPath(path), walPath(dir+"/store.db")) // the WAL before the commit
	if err := s.Close(); err != nil {                    // the commit
		t.Fatal(err)
	}
	copyFile(t, path, dir+"/store.db") // the file after it
	db, err := bolt.Open(dir+"/store.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if recs, _ := readWAL(dir + "/store.db"); len(recs) != 2 {
		t.Fatalf("the copied WAL holds %d records, want 2", len(recs))
	}
	if n, err := recoverWAL(db, dir+"/store.db"); err != nil || n != 0 {
		t.Errorf("replayed %d records (%v), want none: they are in the file", n, err)
	}
	if recs, _ := readWAL(dir + "/store.db"); len(recs) != 0 {
		t.Errorf("the WAL still holds %d records after the replay", len(recs))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A panic in fn, like an error, leaves nothing of fn's in the batch.
func TestStore_Update_PanicInABatch(t *testing.T) {
	s, _ := tempStore(t, WithLinger(time.Hour, time.Hour))
	ctx := context.Background()
	if _, err := s.Update(ctx, create("/p/1", "one")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		s.Update(ctx, func(tx *Tx) error {
			if _, err := tx.Create("/p/2", []byte("two")); err != nil {
				return err
			}
			panic("in fn")
		})
	}()
	if _, ok := get(t, s, "/p/2"); ok {
		t.Error("/p/2 of the panicking write is there")
	}
	if kv, ok := get(t, s, "/p/1"); !ok || string(kv.Value) != "one" {
		t.Errorf("/p/1 = %q %v, want one", kv.Value, ok)
	}
}

// A log left beside a file that was replaced belongs to the old file: a new
// store removes it, and an existing file replays only the revisions that
// follow its own.
func TestStore_WALOfAnotherFile(t *testing.T) {
	ctx := context.Background()
	s, path := tempStore(t, WithLinger(time.Hour, time.Hour))
	for _, k := range []string{"/o/1", "/o/2"} { // revisions 1 and 2, committed
		if _, err := s.Update(ctx, create(k, "old")); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err := Open(path, WithLinger(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/o/3", "/o/4"} { // revisions 3 and 4, in the log
		if _, err := s.Update(ctx, create(k, "old")); err != nil {
			t.Fatal(err)
		}
	}
	oldWAL := t.TempDir() + "/old.wal"
	copyFile(t, walPath(path), oldWAL)
	s.Close()
	if recs, _ := readWAL(strings.TrimSuffix(oldWAL, ".wal")); len(recs) != 2 || recs[0].rev != 3 {
		t.Fatalf("the old log holds %d records, want revisions 3 and 4", len(recs))
	}

	t.Run("a new store", func(t *testing.T) {
		fresh := t.TempDir() + "/store.db"
		copyFile(t, oldWAL, walPath(fresh))
		n, err := Open(fresh)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if kvs := list(t, n, "/o/"); len(kvs) != 0 {
			t.Errorf("a new store replayed another file's log: %v", kvs)
		}
		if _, err := os.Stat(walPath(fresh)); err == nil {
			if recs, _ := readWAL(fresh); len(recs) != 0 {
				t.Errorf("the old log is still there, with %d records", len(recs))
			}
		}
	})
	t.Run("a store whose revision the log does not follow", func(t *testing.T) {
		other := t.TempDir() + "/store.db"
		o, err := Open(other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Update(ctx, create("/x", "mine")); err != nil { // revision 1
			t.Fatal(err)
		}
		o.Close()
		copyFile(t, oldWAL, walPath(other)) // revisions 3 and 4: 2 is missing
		o, err = Open(other, MustExist())
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if rev, err := o.Revision(ctx); err != nil || rev != 1 {
			t.Errorf("revision %d (%v) after opening beside another file's log, want 1", rev, err)
		}
		if kvs := list(t, o, "/o/"); len(kvs) != 0 {
			t.Errorf("replayed another file's log: %v", kvs)
		}
	})
}

func list(t *testing.T, s *Store, prefix string) []KV {
	t.Helper()
	var kvs []KV
	if err := s.View(context.Background(), func(tx *Tx) error {
		var err error
		kvs, err = tx.List(prefix)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return kvs
}

// A compaction makes no revision, so it is committed at once rather than
// logged: a crash right after it keeps it.
func TestStore_CompactIsCommittedAtOnce(t *testing.T) {
	s, path := tempStore(t, WithLinger(time.Hour, time.Hour))
	ctx := context.Background()
	for _, k := range []string{"/c/1", "/c/2"} {
		if _, err := s.Update(ctx, create(k, "v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx, 2); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir() + "/store.db"
	copyFile(t, path, crashed) // the file as a crash would leave it
	s.Close()
	c, err := Open(crashed, MustExist())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.View(ctx, func(tx *Tx) error {
		if tx.CompactedRevision() != 2 || tx.Revision() != 2 {
			t.Errorf("after the crash: compacted %d, revision %d; want 2 and 2", tx.CompactedRevision(), tx.Revision())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Tx.OnDurable's functions run once the write is on disk: in a batch, its
// record is in the WAL file already; with no linger, the file itself holds
// it. They run in order, and not at all for a write that failed.
func TestTx_OnDurable(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		// onDisk says whether revision rev of the store at path is on disk.
		onDisk func(t *testing.T, path string, rev int64) bool
	}{
		{"in a batch, after the WAL's fsync", []Option{WithLinger(time.Hour, time.Hour)}, func(t *testing.T, path string, rev int64) bool {
			recs, err := readWAL(path)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(recs, func(r walRecord) bool { return r.rev == rev })
		}},
		{"without a batch, after the commit", []Option{WithLinger(0, 0)}, func(t *testing.T, path string, rev int64) bool {
			s, err := Open(path, MustExist())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := s.Revision(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return got >= rev
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := tempStore(t, tt.opts...)
			ctx := context.Background()
			var calls []string
			var rev int64
			got, err := s.Update(ctx, func(tx *Tx) error {
				if _, err := tx.Create("/d/1", []byte("one")); err != nil {
					return err
				}
				rev = tx.Revision()
				for _, name := range []string{"first", "second"} {
					tx.OnDurable(func() {
						if !tt.onDisk(t, path, rev) {
							t.Errorf("%s ran before revision %d was on disk", name, rev)
						}
						calls = append(calls, name)
					})
				}
				return nil
			})
			if err != nil || got != rev {
				t.Fatalf("Update: revision %d, %v; want %d", got, err, rev)
			}
			if !slices.Equal(calls, []string{"first", "second"}) {
				t.Errorf("ran %q, want first then second", calls)
			}

			calls = nil
			boom := errors.New("boom")
			if _, err := s.Update(ctx, func(tx *Tx) error {
				tx.OnDurable(func() { calls = append(calls, "failed") })
				if _, err := tx.Create("/d/2", []byte("two")); err != nil {
					return err
				}
				return boom
			}); !errors.Is(err, boom) {
				t.Fatalf("Update: %v, want boom", err)
			}
			if len(calls) != 0 {
				t.Errorf("a failed write ran %q", calls)
			}
		})
	}
}
