package unpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// hostileZstd is a zstd frame of about 19 KB whose header asks for the
// format's largest window, 512 MiB, followed by RLE blocks of 128 KiB each
// (4 bytes apiece): a layer that costs its decoder the window's memory.
func hostileZstd(blocks int) []byte { return rleZstd(29, blocks) }

// rleZstd is a zstd frame whose header asks for a window of 2^windowLog
// bytes (10 to 41), followed by blocks RLE blocks of 128 KiB of zeros.
func rleZstd(windowLog byte, blocks int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd}) // magic
	b.WriteByte(0x00)                       // no single segment, no checksum, no dictionary, no content size
	b.WriteByte((windowLog - 10) << 3)      // Window_Descriptor: 2^windowLog, no mantissa
	for i := range blocks {
		hdr := uint32(1<<1) | uint32(128<<10)<<3 // RLE block of 128 KiB
		if i == blocks-1 {
			hdr |= 1 // last block
		}
		var h [4]byte
		binary.LittleEndian.PutUint32(h[:], hdr)
		b.Write(h[:3])
		b.WriteByte(0) // the byte repeated
	}
	return b.Bytes()
}

// allocated runs f and returns the bytes it allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 19 KB zstd layer that asks for a 512 MiB window is refused before its
// decoder allocates it, with an error naming the window and the limit; a
// legal zstd layer decompresses with a few MiB.
func TestDecompress_ZstdWindowBounded(t *testing.T) {
	hostile := hostileZstd(4800)
	if len(hostile) > 20_000 {
		t.Fatalf("the hostile layer is %d bytes, want about 19 KB", len(hostile))
	}
	var err error
	var n int64
	used := allocated(func() {
		var rc io.ReadCloser
		if rc, err = decompress(bytes.NewReader(hostile)); err == nil {
			n, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
	})
	t.Logf("hostile layer of %d bytes: %d bytes out, %.1f MiB allocated, error: %v", len(hostile), n, float64(used)/(1<<20), err)
	if !errors.Is(err, ErrZstdWindowTooLarge) {
		t.Fatalf("error = %v, want ErrZstdWindowTooLarge", err)
	}
	for _, want := range []string{"512 MiB", "limit of 8 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if used > 16<<20 {
		t.Errorf("refusing the hostile layer allocated %.1f MiB, want under 16 MiB", float64(used)/(1<<20))
	}

	// A legal layer: 16 MiB compressed by klauspost's encoder (an 8 MiB
	// window at its default level) comes back whole, within the bound.
	plain := make([]byte, 16<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range plain {
		plain[i] = "abcdefgh"[rng.IntN(8)]
	}
	var zb bytes.Buffer
	zw, err := zstd.NewWriter(&zb, zstd.WithWindowSize(MaxZstdWindow))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(plain)
	zw.Close()
	var out bytes.Buffer
	out.Grow(len(plain))
	used = allocated(func() {
		var rc io.ReadCloser
		if rc, err = decompress(bytes.NewReader(zb.Bytes())); err == nil {
			_, err = io.Copy(&out, rc)
			rc.Close()
		}
	})
	if err != nil {
		t.Fatalf("a legal zstd layer: %v", err)
	}
	if !bytes.Equal(out.Bytes(), plain) {
		t.Fatal("a legal zstd layer did not decompress to its bytes")
	}
	// TotalAlloc grows with the bytes decoded (the decoder's per-block
	// garbage), so it is logged, not bounded, for a legal layer.
	t.Logf("legal layer of %d bytes (%d compressed): %.1f MiB allocated in all", len(plain), zb.Len(), float64(used)/(1<<20))
}

// A hostile frame after a legal one is refused too: the decoder's own
// bound holds where the first header did not warn.
func TestDecompress_ZstdSecondFrameBounded(t *testing.T) {
	var zb bytes.Buffer
	zw, _ := zstd.NewWriter(&zb)
	zw.Write([]byte("a legal first frame\n"))
	zw.Close()
	zb.Write(hostileZstd(100))
	rc, err := decompress(bytes.NewReader(zb.Bytes()))
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if !errors.Is(err, ErrZstdWindowTooLarge) {
		t.Fatalf("error = %v, want ErrZstdWindowTooLarge", err)
	}
}

func TestZstdFrameWindow(t *testing.T) {
	tests := []struct {
		name   string
		header []byte
		want   uint64
		ok     bool
	}{
		{"window 512 MiB", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 19 << 3}, 512 << 20, true},
		{"window 8 MiB", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 13 << 3}, 8 << 20, true},
		{"window 1.25 KiB (mantissa)", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0<<3 | 2}, 1024 + 256, true},
		{"single segment, 1-byte size", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 200}, 200, true},
		{"single segment, 2-byte size (+256)", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x01}, 256 + 256, true},
		{"single segment, 8-byte size", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x40, 0, 0, 0, 0}, 1 << 30, true},
		{"single segment, truncated", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0}, 0, false},
		{"not zstd", []byte("\x1f\x8b\x08\x00\x00\x00"), 0, false},
		{"too short", []byte{0x28, 0xb5}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := zstdFrameWindow(tt.header)
			if got != tt.want || ok != tt.ok {
				t.Errorf("zstdFrameWindow = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
