package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkWrites compares one fsync'd write per object: raw bbolt on a
// handle kept open (the ceiling), the store (revision, event log, a handle
// that lingers between operations), and the store opening and closing the
// file around every write. Read the ratio of the ns/op; the API server's
// target is at least 0.8x raw bbolt's rate.
func BenchmarkWrites(b *testing.B) {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	b.Run("raw-bbolt", func(b *testing.B) {
		db, err := bolt.Open(diskDir(b), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		bucket := []byte("keys")
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			key := fmt.Appendf(nil, "/registry/pods/default/p%08d", i)
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, value) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"store", nil},
		{"store-open-per-write", []Option{WithLinger(0, 0)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(diskDir(b), bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key := fmt.Sprintf("/registry/pods/default/p%08d", i)
				if _, err := s.Update(ctx, func(tx *Tx) error { _, err := tx.Create(key, value); return err }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenClose is what opening the file costs a store operation
// without the linger: bbolt Open and Close of a store holding 1000 objects.
func BenchmarkOpenClose(b *testing.B) {
	path := diskDir(b)
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Update(context.Background(), func(tx *Tx) error {
		for i := 0; i < 1000; i++ {
			if _, err := tx.Create(fmt.Sprintf("/k/%04d", i), make([]byte, 1024)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	s.Close()
	for _, readOnly := range []bool{false, true} {
		b.Run(map[bool]string{false: "read-write", true: "read-only"}[readOnly], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: readOnly})
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
