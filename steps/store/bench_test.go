package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Rounds of BenchmarkWrites: each side writes writesPerRound objects of
// writeValueSize bytes per round, one fsync'd transaction each, taking
// turns every writesPerTurn writes.
const (
	writeRounds    = 5
	writesPerRound = 300
	writesPerTurn  = 20
	writeValueSize = 1200 // about a stored pod
)

// BenchmarkWrites compares one fsync'd write per object, on the disk: raw
// bbolt on a handle kept open with default options (the ceiling: one Put
// per transaction), and the store (revision, history, a handle that
// lingers between operations). The sides take turns every writesPerTurn
// writes, so that a slow spell of the shared disk slows each side alike;
// each round starts new files. It prints every round's rate ratio (store
// rate / raw rate) and reports the median. The other sides, each with its
// own ratio: raw bbolt writing an index entry too (raw-indexed: what any
// layout with its index on disk costs when every write is a commit), the
// store committing every write (no batch, no WAL), the store opening and
// closing the file around every write, and the store with bbolt's
// NoFreelistSync and hashmap freelist (etcd's settings).
func BenchmarkWrites(b *testing.B) {
	value := make([]byte, writeValueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	key := func(i int) string { return fmt.Sprintf("/registry/pods/default/p%08d", i) }
	// A side opens its file and returns its write and its close.
	type writer struct {
		write   func(i int) error
		endTurn func() error // nil: nothing to do
		close   func() error
	}
	raw := func(path string) writer {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		bucket := []byte("keys")
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
			b.Fatal(err)
		}
		return writer{
			write: func(i int) error {
				k := []byte(key(i))
				return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(k, value) })
			},
			close: db.Close,
		}
	}
	// rawIndexed is raw bbolt with an index, in the store's layout: the
	// value under its revision, and 28 bytes under the key's name, in the
	// two keyspaces of one bucket. Its rate is the store's ceiling.
	rawIndexed := func(path string) writer {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(kvBucket); return err }); err != nil {
			b.Fatal(err)
		}
		index := make([]byte, keyRecordLen)
		return writer{
			write: func(i int) error {
				return db.Update(func(tx *bolt.Tx) error {
					kv := tx.Bucket(kvBucket)
					if err := (keyspace{b: kv, prefix: keysPrefix}).Put([]byte(key(i)), index); err != nil {
						return err
					}
					return keyspace{b: kv, prefix: revsPrefix}.Put(revKey(int64(i+1), 0), value)
				})
			},
			close: db.Close,
		}
	}
	// A store's turn ends with Close, which commits its batch, and a new
	// Open: the commit is on its own clock, as for a process that writes
	// and exits.
	store := func(opts ...Option) func(string) writer {
		return func(path string) writer {
			s, err := Open(path, opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			return writer{
				write: func(i int) error {
					_, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create(key(i), value); return err })
					return err
				},
				endTurn: func() error {
					if err := s.Close(); err != nil {
						return err
					}
					s, err = Open(path, opts...)
					return err
				},
				close: func() error { return s.Close() },
			}
		}
	}
	sides := []struct {
		name string
		open func(path string) writer
	}{
		{"raw", raw},
		{"store", store()},
		{"raw-indexed", rawIndexed},
		{"store-commit-per-write", store(withoutBatches())},
		{"store-open-per-write", store(WithLinger(0, 0))},
		{"store-nofreelistsync", store(withBoltOptions(func(o *bolt.Options) {
			o.NoFreelistSync, o.FreelistType = !o.ReadOnly, bolt.FreelistMapType
		}))},
	}
	for n := 0; n < b.N; n++ {
		dir := filepath.Dir(diskDir(b))
		walls := make([][]time.Duration, len(sides))
		for r := 0; r < writeRounds; r++ {
			ws := make([]writer, len(sides))
			for i, side := range sides {
				ws[i] = side.open(filepath.Join(dir, fmt.Sprintf("%s-%d.db", side.name, r)))
				walls[i] = append(walls[i], 0)
			}
			for turn := 0; turn < writesPerRound/writesPerTurn; turn++ {
				for j := range sides {
					i := (turn + j) % len(sides)
					start := time.Now()
					for w := turn * writesPerTurn; w < (turn+1)*writesPerTurn; w++ {
						if err := ws[i].write(w); err != nil {
							b.Fatal(err)
						}
					}
					if ws[i].endTurn != nil {
						if err := ws[i].endTurn(); err != nil {
							b.Fatal(err)
						}
					}
					walls[i][r] += time.Since(start)
				}
			}
			for _, w := range ws {
				if err := w.close(); err != nil {
					b.Fatal(err)
				}
			}
			line := fmt.Sprintf("round %d: raw %4.0fµs/write", r+1, perWrite(walls[0][r]))
			for i := 1; i < len(sides); i++ {
				line += fmt.Sprintf(", %s %4.0fµs (%.2fx)", sides[i].name, perWrite(walls[i][r]), float64(walls[0][r])/float64(walls[i][r]))
			}
			b.Log(line)
		}
		for i := 1; i < len(sides); i++ {
			ratio := medianRatio(walls[0], walls[i])
			b.Logf("%-21s median rate %.2fx raw", sides[i].name, ratio)
			b.ReportMetric(ratio, sides[i].name+"-rate-x-raw")
		}
		b.ReportMetric(perWrite(median(walls[0])), "raw-µs/write")
		b.ReportMetric(perWrite(median(walls[1])), "store-µs/write")
	}
}

func perWrite(d time.Duration) float64 {
	return float64(d) / float64(time.Microsecond) / writesPerRound
}

// medianRatio is the median of the per-round rate ratios of b to a:
// a[i]/b[i] (times, so rates the other way round).
func medianRatio(a, b []time.Duration) float64 {
	ratios := make([]float64, len(a))
	for i := range a {
		ratios[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkOpenClose is what opening the file costs an operation: bbolt
// Open and Close of a store of 10,000 objects of 1.2KB, each written in its
// own transaction (as the API server writes them), read-write as the store
// opens it, read-write with NoFreelistSync (bbolt rebuilds the freelist by
// walking the whole file at every read-write open), and read-only.
func BenchmarkOpenClose(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts bolt.Options
	}{
		{"read-write", bolt.Options{}},
		{"read-write-nofreelistsync", bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType}},
		{"read-only", bolt.Options{ReadOnly: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := diskDir(b)
			s, err := Open(path, withBoltOptions(func(o *bolt.Options) {
				o.NoSync = true // only to build the file fast
				if bc.opts.NoFreelistSync && !o.ReadOnly {
					o.NoFreelistSync, o.FreelistType = true, bc.opts.FreelistType
				}
			}))
			if err != nil {
				b.Fatal(err)
			}
			value := make([]byte, writeValueSize)
			for i := 0; i < 10000; i++ {
				if _, err := s.Update(context.Background(), func(tx *Tx) error {
					_, err := tx.Create(fmt.Sprintf("/registry/pods/default/p%05d", i), value)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
			opts := bc.opts
			opts.Timeout = time.Second
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				db, err := bolt.Open(path, 0o600, &opts)
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}

// BenchmarkWatchLatency: a child process writes b.N keys whose values are
// the time just before each Update; this process's watcher measures when
// each event arrives. The latency includes the child's fsync. back-to-back
// is the worst case (the writer keeps the file; the watcher gets its turn
// every 50ms); every-5ms is closer to API traffic.
func BenchmarkWatchLatency(b *testing.B) {
	for _, gap := range []time.Duration{0, 5 * time.Millisecond} {
		name := "back-to-back"
		if gap > 0 {
			name = "every-" + gap.String()
		}
		b.Run(name, func(b *testing.B) {
			path := diskDir(b)
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.Watch(ctx, "/stamps/", 0)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cmd, _ := helper(b, "stamps", path, fmt.Sprintf("%d %s", b.N, gap))
			lat := make([]time.Duration, 0, b.N)
			timeout := time.After(time.Duration(b.N)*(gap+20*time.Millisecond) + 30*time.Second)
			for len(lat) < b.N {
				select {
				case ev, ok := <-w.Events():
					if !ok {
						b.Fatalf("watch ended: %v", w.Err())
					}
					at := time.Now()
					ns, err := strconv.ParseInt(string(ev.KV.Value), 10, 64)
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, at.Sub(time.Unix(0, ns)))
				case <-timeout:
					b.Fatalf("%d of %d events", len(lat), b.N)
				}
			}
			b.StopTimer()
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			ms := func(q float64) float64 {
				return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
			b.ReportMetric(ms(1), "max-ms")
		})
	}
}

// BenchmarkList reads 10,000 keys of 1.2KB in one View, as the API server
// lists 10,000 pods: raw bbolt walking one bucket of values with a cursor
// (the floor), and the store's List, which walks keys and looks each value
// up in revs.
func BenchmarkList(b *testing.B) {
	const n = 10000
	value := make([]byte, writeValueSize)
	dir := filepath.Dir(diskDir(b))
	s, err := Open(filepath.Join(dir, "store.db"), withBoltOptions(func(o *bolt.Options) { o.NoSync = true }))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(dir, "raw.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("pods")
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("/registry/pods/default/p%05d", i)
		if _, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create(key, value); return err }); err != nil {
			b.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(bucket)
			if err != nil {
				return err
			}
			return bk.Put([]byte(key), value)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("raw-bbolt", func(b *testing.B) {
		for b.Loop() {
			var kvs []KV
			if err := db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(bucket).Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					kvs = append(kvs, KV{Key: string(k), Value: slices.Clone(v)})
				}
				return nil
			}); err != nil || len(kvs) != n {
				b.Fatalf("%d keys, %v", len(kvs), err)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			var kvs []KV
			if err := s.View(ctx, func(tx *Tx) error {
				var err error
				kvs, err = tx.List("/registry/pods/")
				return err
			}); err != nil || len(kvs) != n {
				b.Fatalf("%d keys, %v", len(kvs), err)
			}
		}
	})
}

// BenchmarkPagesPerCommit counts what one write per object makes bbolt
// write, from bbolt's own statistics (tx.Stats, summed by db.Stats): the
// pages written per commit (each dirty page, or run of overflow pages, is
// one write; the meta page is one), the pages allocated per commit, and the
// node splits per commit, averaged over the writes that fill an empty file
// with n objects of writeValueSize bytes: raw bbolt (one Put per commit),
// and the store with names in order (p00000001, p00000002...) and in random
// order (web-9e3779b1...). Each page written costs ~25-30µs of fsync on the
// project's disk. NoSync: this counts, it does not time.
func BenchmarkPagesPerCommit(b *testing.B) {
	value := make([]byte, writeValueSize)
	inOrder := func(i int) string { return fmt.Sprintf("/registry/pods/default/p%08d", i) }
	random := func(i int) string { return fmt.Sprintf("/registry/pods/default/web-%08x", uint32(i)*2654435761) }
	noSync := &bolt.Options{NoSync: true}
	// A side returns its database (to read its statistics) and its write.
	type side struct {
		name string
		open func(b *testing.B, path string) (*bolt.DB, func(i int) error)
	}
	store := func(key func(int) string) func(b *testing.B, path string) (*bolt.DB, func(int) error) {
		return func(b *testing.B, path string) (*bolt.DB, func(int) error) {
			// A linger of an hour: one handle, whose statistics cover
			// every write.
			s, err := Open(path, WithLinger(time.Hour, time.Hour), withoutBatches(),
				withBoltOptions(func(o *bolt.Options) { o.NoSync = true }))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			ctx := context.Background()
			var db *bolt.DB
			if err := s.do(ctx, true, true, func(d *bolt.DB) error { db = d; return nil }); err != nil {
				b.Fatal(err)
			}
			return db, func(i int) error {
				_, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create(key(i), value); return err })
				return err
			}
		}
	}
	sides := []side{
		{"raw", func(b *testing.B, path string) (*bolt.DB, func(int) error) {
			db, err := bolt.Open(path, 0o600, noSync)
			if err != nil {
				b.Fatal(err)
			}
			bucket := []byte("keys")
			if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db, func(i int) error {
				return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(inOrder(i)), value) })
			}
		}},
		{"store", store(inOrder)},
		{"store-random-names", store(random)},
	}
	for _, n := range []int{300, 2000, 10000} {
		for _, sd := range sides {
			b.Run(fmt.Sprintf("%s-%d", sd.name, n), func(b *testing.B) {
				var writes, pages, splits int64
				for range b.N {
					db, write := sd.open(b, filepath.Join(b.TempDir(), "store.db"))
					before := db.Stats().TxStats
					for i := range n {
						if err := write(i); err != nil {
							b.Fatal(err)
						}
					}
					after := db.Stats().TxStats
					d := after.Sub(&before)
					writes, pages, splits = writes+d.GetWrite(), pages+d.GetPageCount(), splits+d.GetSplit()
				}
				commits := float64(b.N * n)
				b.ReportMetric(float64(writes)/commits, "pages-written/commit")
				b.ReportMetric(float64(pages)/commits, "pages-allocated/commit")
				b.ReportMetric(float64(splits)/commits, "splits/commit")
			})
		}
	}
}
