package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"github.com/podlab/podlab/internal/testenv"
)

// oldZstdPeakMB is what the issue measured for a 19 KB zstd layer asking
// for a 512 MiB window, unpacked with containerd's decoder (which accepts
// it): 637 MB of memory.
const oldZstdPeakMB = 637

// maxZstdGrowth is what BenchmarkUnpack_ZstdWindow lets an unpack of a
// legal zstd layer add to the resident set: the 8 MiB window, the
// decoder's buffers, the read-ahead and the tar's, with room (measured:
// 11 to 14 MB).
const maxZstdGrowth = 64e6

// BenchmarkUnpack_ZstdWindow unpacks (with Unpack, the native snapshotter)
// the worst honest zstd layers the bound (MaxZstdWindow, 8 MiB) allows, and
// the hostile one it refuses, side by side, reporting each one's peak
// memory against the 637 MB:
//   - "19KB-frame-8MiB-window": the layer (RLE blocks of zeros, an
//     empty tar and its padding, 600 MiB uncompressed) with the largest
//     window the bound lets through;
//   - "16MiB-file-8MiB-window": a real tar of one 16 MiB file, compressed
//     with an 8 MiB window (what zstd -19 uses), so the decoder does use
//     its history;
//   - "19KB-frame-512MiB-window-refused": the layer as it was,
//     refused before its decoder allocates the window.
//
// peak-rss-MB is the process's peak resident set during the unpack (VmHWM,
// reset through /proc/self/clear_refs first; it includes the test binary's
// own memory and the mapped read-ahead), rss-growth-MB the part of it over
// the resident set before the unpack, alloc-MB/op the Go heap allocated,
// x-637MB the peak over the figure. A growth over maxZstdGrowth
// fails the benchmark.
func BenchmarkUnpack_ZstdWindow(b *testing.B) {
	plain := make([]byte, 16<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range plain {
		plain[i] = "abcdefgh"[rng.IntN(8)]
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: int64(len(plain)), Typeflag: tar.TypeReg})
	tw.Write(plain)
	tw.Close()
	var zb bytes.Buffer
	zw, err := zstd.NewWriter(&zb, zstd.WithWindowSize(MaxZstdWindow))
	if err != nil {
		b.Fatal(err)
	}
	zw.Write(tb.Bytes())
	zw.Close()

	const blocks = 4800 // 19 KB, 600 MiB of zeros
	zeros, block := sha256.New(), make([]byte, 128<<10)
	for range blocks {
		zeros.Write(block)
	}
	zerosDiffID := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", zeros.Sum(nil))}
	tarDiffID := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(tb.Bytes()))}

	for _, bc := range []struct {
		name    string
		blob    []byte
		diffID  v1.Hash
		refused bool
	}{
		{"19KB-frame-8MiB-window", rleZstd(23, blocks), zerosDiffID, false},
		{"16MiB-file-8MiB-window", zb.Bytes(), tarDiffID, false},
		{"19KB-frame-512MiB-window-refused", hostileZstd(blocks), zerosDiffID, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			img := imageOf(b, static.NewLayer(bc.blob, types.OCILayerZStd))
			img = withDiffIDs(b, img, func([]v1.Hash) []v1.Hash { return []v1.Hash{bc.diffID} })
			dir := b.TempDir()
			var peak, growth, alloc uint64
			for i := 0; b.Loop(); i++ {
				bundle := filepath.Join(dir, strconv.Itoa(i))
				var err error
				base, p, a := peakRSS(b, func() { _, err = Unpack(context.Background(), img, bundle, Options{}) })
				peak, growth, alloc = max(peak, p), max(growth, p-min(p, base)), alloc+a
				if bc.refused != errors.Is(err, ErrZstdWindowTooLarge) || !bc.refused && err != nil {
					b.Fatalf("unpacking the %d-byte layer: %v (refused: want %v)", len(bc.blob), err, bc.refused)
				}
				b.StopTimer()
				os.RemoveAll(bundle)
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/1e6, "peak-rss-MB")
			b.ReportMetric(float64(growth)/1e6, "rss-growth-MB")
			b.ReportMetric(float64(alloc)/1e6/float64(b.N), "alloc-MB/op")
			b.ReportMetric(float64(peak)/1e6/oldZstdPeakMB, "x-637MB")
			if growth > maxZstdGrowth {
				b.Errorf("unpacking the %d-byte layer grew the resident set by %.1f MB, want at most %.0f MB (the bound is an %d MiB window)",
					len(bc.blob), float64(growth)/1e6, maxZstdGrowth/1e6, MaxZstdWindow>>20)
			}
		})
	}
}

// peakRSS runs f and returns the process's resident set before it ran,
// its peak while it ran (VmHWM after resetting it; Linux 4.0 and later)
// and the Go heap bytes f allocated.
func peakRSS(b *testing.B, f func()) (base, peak, alloc uint64) {
	b.Helper()
	b.StopTimer()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
	base = procStatus(b, "VmRSS")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.StartTimer()
	f()
	b.StopTimer()
	runtime.ReadMemStats(&after)
	peak = procStatus(b, "VmHWM")
	b.StartTimer()
	return base, peak, after.TotalAlloc - before.TotalAlloc
}

// procStatus is the field (in kB there) of /proc/self/status, in bytes.
func procStatus(b *testing.B, field string) uint64 {
	b.Helper()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("%s %q: %v", field, v, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// BenchmarkUnpack_SHA512 unpacks (native snapshotter) the same image, two
// gzip layers of 8 MiB of tar each, with every digest a sha256 and with
// every digest a sha512 (the diff_ids too, which Unpack checks as it
// applies), side by side: alternating which goes first, the medians in ms
// and the median of the per-round ratios.
func BenchmarkUnpack_SHA512(b *testing.B) {
	const rounds = 5
	rng := rand.New(rand.NewPCG(3, 4))
	var layers [][]byte
	for l := range 2 {
		var entries []entry
		for f := range 16 {
			body := make([]byte, 512<<10)
			for i := range body {
				body[i] = "abcdefgh \n"[rng.IntN(10)]
			}
			entries = append(entries, file(fmt.Sprintf("srv/%d/%d", l, f), string(body)))
		}
		layers = append(layers, tarBytes(b, entries))
	}
	imgs := map[string]v1.Image{}
	for _, alg := range []string{"sha256", "sha512"} {
		imgs[alg] = imageByAlg(b, alg, layers...)
	}
	dir := b.TempDir()
	n := 0
	unpack := func(alg string) time.Duration {
		n++
		bundle := filepath.Join(dir, strconv.Itoa(n))
		began := time.Now()
		res, err := Unpack(context.Background(), imgs[alg], bundle, Options{})
		took := time.Since(began)
		if err != nil {
			b.Fatalf("unpacking the %s image: %v", alg, err)
		}
		if res.Layers[0].DiffID.Algorithm != alg {
			b.Fatalf("the %s image's diff_id came as %s", alg, res.Layers[0].DiffID)
		}
		b.StopTimer()
		os.RemoveAll(bundle)
		b.StartTimer()
		return took
	}
	testenv.Paired(b, rounds, "sha256", "sha512", func() time.Duration { return unpack("sha256") }, func() time.Duration { return unpack("sha512") })
}
