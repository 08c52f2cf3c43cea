package unpack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

func TestReadAhead_HandsOutAtMostItsChunks(t *testing.T) {
	ra, err := newReadAhead(2)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.release()
	never := make(chan struct{})
	a, b := ra.get(never), ra.get(never)
	for _, c := range [][]byte{a, b} {
		if len(c) != chunkSize || cap(c) != chunkSize {
			t.Fatalf("chunk len %d cap %d, want both %d (an append must not reach the next chunk)", len(c), cap(c), chunkSize)
		}
	}
	a[0], b[0] = 'a', 'b'
	if a[0] != 'a' {
		t.Fatal("the two chunks share memory")
	}

	stop := make(chan struct{})
	got := make(chan []byte)
	go func() { got <- ra.get(stop) }()
	select {
	case c := <-got:
		t.Fatalf("a third chunk (%d bytes) was handed out; the read-ahead holds two", len(c))
	case <-time.After(50 * time.Millisecond):
	}
	ra.free <- a
	if c := <-got; &c[0] != &a[0] {
		t.Error("get, once a chunk came back, should hand out that chunk")
	}

	go func() { got <- ra.get(stop) }()
	close(stop)
	if c := <-got; c != nil {
		t.Errorf("get after stop returned %d bytes, want nil", len(c))
	}
}

// TestMapReadAhead: where the kernel refuses the whole read-ahead (strict
// overcommit, ulimit -v), the unpack asks for less rather than failing.
func TestMapReadAhead(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name       string
		limit      int   // the most the fake kernel maps
		refuse     error // what it says above the limit
		wantChunks int
		wantSizes  []int // the mappings asked for, in MiB
		wantErr    string
	}{
		{"all of it", 1 << 30, unix.ENOMEM, maxChunks, []int{128}, ""},
		{"a quarter", 40 * MiB, unix.ENOMEM, 256, []int{128, 64, 32}, ""},
		{"only the minimum", 1 * MiB, unix.ENOMEM, minChunks, []int{128, 64, 32, 16, 8, 4, 2, 1}, ""},
		{"not even the minimum", MiB / 2, unix.ENOMEM, 0, []int{128, 64, 32, 16, 8, 4, 2, 1}, "mapping 1024 KiB for decompressed layers: cannot allocate memory"},
		{"another error is not retried", 0, unix.EPERM, 0, []int{128}, "mapping 131072 KiB for decompressed layers: operation not permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sizes []int
			ra, err := mapReadAhead(0, func(size int) ([]byte, error) {
				sizes = append(sizes, size/MiB)
				if size > tt.limit {
					return nil, tt.refuse
				}
				return make([]byte, size), nil
			})
			if fmt.Sprint(sizes) != fmt.Sprint(tt.wantSizes) {
				t.Errorf("asked for %v MiB, want %v", sizes, tt.wantSizes)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ra.chunks != tt.wantChunks || len(ra.mem) != tt.wantChunks*chunkSize || cap(ra.free) != tt.wantChunks {
				t.Errorf("read-ahead of %d chunks (%d bytes, free list %d), want %d chunks", ra.chunks, len(ra.mem), cap(ra.free), tt.wantChunks)
			}
		})
	}
}

// noise is n bytes gzip cannot shrink, so a layer's chunks are many.
func noise(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// TestUnpack_SmallReadAhead unpacks layers many times larger than the
// read-ahead, so decompression keeps waiting for archive.Apply to hand
// chunks back, and the next layer's decompression for the one before it.
func TestUnpack_SmallReadAhead(t *testing.T) {
	big1, big2, big3 := noise(1, 5*chunkSize/2), noise(2, 3*chunkSize), noise(3, chunkSize+1)
	img := imageOf(t,
		gz(t, dir("d"), file("d/one", big1), file("d/small", "s"), file("gone", big2)),
		raw(t, file("d/one", big3), whiteout("", "gone")),
		gz(t, file("d/two", big2), file("tiny", "t")),
	)
	for _, chunks := range []int{1, 2, 3, 64} {
		t.Run(fmt.Sprintf("%d-chunks", chunks), func(t *testing.T) {
			s := newSandbox(t)
			res, err := Unpack(context.Background(), img, s.bundle, Options{readAhead: chunks})
			if err != nil {
				t.Fatal(err)
			}
			checkRootFS(t, s.rootfs(), want{
				files:  map[string]string{"d/one": big3, "d/small": "s", "d/two": big2, "tiny": "t"},
				absent: []string{"gone"},
			})
			if len(res.Layers) != 3 {
				t.Errorf("%d layers reported, want 3", len(res.Layers))
			}
		})
	}
}

// TestUnpack_LayersInflateOneAfterAnother checks that a layer's blob is not
// read past its first bytes (the compression header, read when it is
// opened) until the layer before it has been read to its end: two inflating
// goroutines would take turns on a core with archive.Apply.
func TestUnpack_LayersInflateOneAfterAnother(t *testing.T) {
	var mu sync.Mutex
	var events []string
	logged := func(i int, l v1.Layer) v1.Layer {
		return eventLayer{Layer: l, event: func(e string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, fmt.Sprintf("%d %s", i, e))
		}}
	}
	var layers []v1.Layer
	for i := range 3 {
		layers = append(layers, logged(i, gz(t, file(fmt.Sprintf("f%d", i), noise(uint64(10+i), 6*chunkSize)))))
	}
	s := newSandbox(t)
	if _, err := Unpack(context.Background(), imageOf(t, layers...), s.bundle, Options{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < 3; i++ {
		reads := 0
		for _, e := range events {
			if e == fmt.Sprintf("%d eof", i-1) {
				break
			}
			if e == fmt.Sprintf("%d read", i) {
				reads++
			}
		}
		if reads > 1 {
			t.Errorf("layer %d's blob was read %d times before layer %d's ended; want only its header read (events: %s)",
				i, reads, i-1, strings.Join(events, ", "))
		}
	}
}

type eventLayer struct {
	v1.Layer
	event func(string)
}

func (l eventLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return eventReader{rc: rc, event: l.event}, nil
}

type eventReader struct {
	rc    io.ReadCloser
	event func(string)
}

func (r eventReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.event("read")
	}
	if err == io.EOF {
		r.event("eof")
	}
	return n, err
}

func (r eventReader) Close() error { return r.rc.Close() }

// TestUnpack_FailureWithSmallReadAhead: a layer that fails in the middle of
// an image, with chunks still out, must stop every decompressing goroutine.
func TestUnpack_FailureWithSmallReadAhead(t *testing.T) {
	l1 := gz(t, file("a", noise(4, 4*chunkSize)))
	l2 := gz(t, file("b", noise(5, 4*chunkSize)))
	l3 := gz(t, file("c", noise(6, 4*chunkSize)))
	fake := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
	img := withDiffIDs(t, imageOf(t, l1, l2, l3), func(h []v1.Hash) []v1.Hash { return []v1.Hash{h[0], fake, h[2]} })
	before := runtime.NumGoroutine()
	s := newSandbox(t)
	_, err := Unpack(context.Background(), img, s.bundle, Options{readAhead: 2})
	if !errors.Is(err, ErrDiffIDMismatch) || !strings.Contains(err.Error(), "layer 2 of 3") {
		t.Fatalf("error %v, want ErrDiffIDMismatch for layer 2 of 3", err)
	}
	s.checkNoBundle(t)
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the failed unpack, %d before: a decompressing goroutine was left running", n, before)
	}
}
