package pull

import (
	"context"
	"testing"
)

// BenchmarkRepull measures a pull of an image whose blobs are all stored:
// one GET /v2/ (the ping), one HEAD of the tag, no blob.
func BenchmarkRepull(b *testing.B) {
	reg := newTestRegistry(b)
	idx, _ := ociIndex(b, "linux/amd64", "linux/arm64")
	ref := reg.push(b, "demo/multi:v1", idx)
	s := openStore(b)
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		b.Fatal(err)
	}
	reg.reset()
	b.ResetTimer()
	for b.Loop() {
		res, err := Pull(context.Background(), s, ref, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !res.UpToDate {
			b.Fatal("not up to date")
		}
	}
	b.StopTimer()
	if got := reg.seen("/blobs/"); len(got) != 0 {
		b.Fatalf("re-pulls fetched blobs: %v", got)
	}
}

// BenchmarkColdPull measures a first pull of a 4-layer, 32 MB image from
// the in-process registry into an empty store.
func BenchmarkColdPull(b *testing.B) {
	reg := newTestRegistry(b)
	ref := reg.push(b, "demo/big:v1", ociImage(b, amd64, 8<<20, 8<<20, 8<<20, 8<<20))
	b.SetBytes(32 << 20)
	for b.Loop() {
		b.StopTimer()
		s := openStore(b)
		b.StartTimer()
		if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
