package unpack

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	benchLayers        = 4
	benchFilesPerLayer = 5000
)

// benchImage writes benchLayers gzip layers of many small, compressible
// files (1-16 KiB of words) to dir and returns the image and the layer
// files, in order.
func benchImage(b *testing.B, dir string) (v1.Image, []string) {
	return benchImageOf(b, dir, benchLayers)
}

// benchImageOf is benchImage with n layers.
func benchImageOf(b *testing.B, dir string, n int) (v1.Image, []string) {
	b.Helper()
	words := strings.Fields("the kubelet asks the container runtime to pull the image unpack its layers into a bundle write the runtime spec and start the process with runc in new namespaces and cgroups")
	rng := rand.New(rand.NewPCG(1, 2))
	var layers []v1.Layer
	var files []string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("layer%d.tar.gz", i))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		zw, _ := gzip.NewWriterLevel(f, gzip.DefaultCompression)
		tw := tar.NewWriter(zw)
		var sb strings.Builder
		for j := 0; j < benchFilesPerLayer; j++ {
			if j%100 == 0 {
				tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("usr/share/d%d-%d/", i, j/100), Mode: 0o755, ModTime: time.Unix(0, 0)})
			}
			sb.Reset()
			for size := 1024 + rng.IntN(15*1024); sb.Len() < size; {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			body := sb.String()
			// every layer after the first overwrites some files of the one below
			name := fmt.Sprintf("usr/share/d%d-%d/f%d", i, j/100, j)
			if i > 0 && j%10 == 0 {
				name = fmt.Sprintf("usr/share/d%d-%d/f%d", i-1, j/100, j)
			}
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)})
			tw.Write([]byte(body))
		}
		if err := tw.Close(); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		l, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			b.Fatal(err)
		}
		layers = append(layers, l)
		files = append(files, p)
	}
	return imageOf(b, layers...), files
}

// BenchmarkUnpack unpacks a generated image of 4 gzip layers x 5000 small
// files with Unpack, and the same layer blobs with `tar -xzf` one after the
// other, for comparison (`make bench` compares the whole command to tar and
// umoci). Compare the two ns/op.
func BenchmarkUnpack(b *testing.B) {
	tmp := b.TempDir()
	img, layerFiles := benchImage(b, tmp)
	var size int64
	for _, f := range layerFiles {
		fi, _ := os.Stat(f)
		size += fi.Size()
	}

	b.Run("podlab", func(b *testing.B) {
		b.SetBytes(size)
		defer reportCPU(b)()
		for i := 0; b.Loop(); i++ {
			bundle := filepath.Join(tmp, fmt.Sprintf("bundle-%d", i))
			if _, err := Unpack(context.Background(), img, bundle, Options{}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(bundle)
			b.StartTimer()
		}
	})
	b.Run("tar-xzf", func(b *testing.B) {
		if _, err := exec.LookPath("tar"); err != nil {
			b.Skip("no tar")
		}
		b.SetBytes(size)
		defer reportCPU(b)()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(tmp, fmt.Sprintf("tar-%d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for _, l := range layerFiles {
				if out, err := exec.Command("tar", "-xzf", l, "-C", dir).CombinedOutput(); err != nil {
					b.Fatalf("tar: %v\n%s", err, out)
				}
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	b.Run("umoci", func(b *testing.B) {
		umoci, err := exec.LookPath("umoci")
		if err != nil {
			b.Skip("no umoci")
		}
		layoutDir := filepath.Join(tmp, "layout")
		if _, err := os.Stat(layoutDir); err != nil {
			cfg, err := img.ConfigFile()
			if err != nil {
				b.Fatal(err)
			}
			cfg = cfg.DeepCopy()
			cfg.OS, cfg.Architecture = "linux", "amd64"
			withPlatform, err := mutate.ConfigFile(img, cfg)
			if err != nil {
				b.Fatal(err)
			}
			p, err := layout.Write(layoutDir, empty.Index)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.AppendImage(withPlatform, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "bench"})); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(size)
		defer reportCPU(b)()
		for i := 0; b.Loop(); i++ {
			bundle := filepath.Join(tmp, fmt.Sprintf("umoci-%d", i))
			if out, err := exec.Command(umoci, "unpack", "--image", layoutDir+":bench", bundle).CombinedOutput(); err != nil {
				b.Fatalf("umoci: %v\n%s", err, out)
			}
			b.StopTimer()
			os.RemoveAll(bundle)
			b.StartTimer()
		}
	})
}

// reportCPU reports the CPU time (user and system, this process and its
// children such as unpigz, tar and gzip) per operation: on a shared machine
// it varies less than the wall time.
func reportCPU(b *testing.B) func() {
	before := cpuTime()
	return func() {
		b.ReportMetric((cpuTime()-before).Seconds()/float64(b.N), "cpu-s/op")
	}
}

func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// BenchmarkSnapshots measures the overlayfs snapshotter (issue 15), each
// figure against its target, side by side in one run:
//
//   - unpack: a 5-layer image (5 x 5000 small files) into a fresh
//     snapshots directory, against `tar -xzf` of its layers in order into
//     one directory, alternately; the best of 3 of each; target <= 0.8x.
//   - second-rootfs: a second container's rootfs from the snapshots already
//     there (nothing unpacked: an upper directory and a mount); target
//     <= 50 ms.
//   - empty-layer: an image of MaxLayers empty layers, read from an OCI
//     layout as the content store keeps it, the cost per layer (the whole
//     unpack over the layers, best of 5); target < 1 ms.
func BenchmarkSnapshots(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the overlayfs snapshotter needs root (mount)")
	}
	if _, err := exec.LookPath("tar"); err != nil {
		b.Fatal("no tar on PATH")
	}
	tmp := b.TempDir()
	var img v1.Image
	var layerFiles []string
	image := func() {
		if img == nil {
			img, layerFiles = benchImageOf(b, tmp, 5)
		}
	}
	ctx := context.Background()
	round := 0
	next := func(name string) string { round++; return filepath.Join(tmp, fmt.Sprintf("%s-%d", name, round)) }
	snapshotUnpack := func() time.Duration {
		snaps, err := OpenSnapshots(next("snapshots"))
		if err != nil {
			b.Fatal(err)
		}
		bundle := next("bundle")
		start := time.Now()
		if _, err := Unpack(ctx, img, bundle, Options{Snapshotter: Overlayfs, Snapshots: snaps}); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if err := RemoveBundle(bundle); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(snaps.Root)
		return took
	}
	tarUnpack := func() time.Duration {
		dir := next("tar")
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for _, l := range layerFiles {
			if out, err := exec.Command("tar", "-xzf", l, "-C", dir).CombinedOutput(); err != nil {
				b.Fatalf("tar: %v\n%s", err, out)
			}
		}
		took := time.Since(start)
		os.RemoveAll(dir)
		return took
	}
	best := func(ds []time.Duration) time.Duration { return slices.Min(ds) }

	b.Run("unpack-5-layers", func(b *testing.B) {
		image()
		var snap, tarT []time.Duration
		for b.Loop() {
			for range 3 {
				snap = append(snap, snapshotUnpack())
				tarT = append(tarT, tarUnpack())
			}
		}
		ratio := float64(best(snap)) / float64(best(tarT))
		b.ReportMetric(float64(best(snap).Milliseconds()), "snapshots-ms")
		b.ReportMetric(float64(best(tarT).Milliseconds()), "tar-xzf-ms")
		b.ReportMetric(ratio, "x-tar")
		if ratio > 0.8 {
			b.Errorf("unpack into snapshots took %.2fx the time of tar -xzf of the layers in order (%v against %v); target <= 0.8x", ratio, best(snap), best(tarT))
		}
	})

	b.Run("second-rootfs", func(b *testing.B) {
		image()
		snaps, err := OpenSnapshots(next("snapshots"))
		if err != nil {
			b.Fatal(err)
		}
		first := next("bundle")
		if _, err := Unpack(ctx, img, first, Options{Snapshotter: Overlayfs, Snapshots: snaps}); err != nil {
			b.Fatal(err)
		}
		defer RemoveBundle(first)
		var took []time.Duration
		for b.Loop() {
			bundle := next("bundle")
			start := time.Now()
			res, err := Unpack(ctx, img, bundle, Options{Snapshotter: Overlayfs, Snapshots: snaps})
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
			if res.Total.Bytes != 0 {
				b.Fatalf("the second container unpacked %d bytes", res.Total.Bytes)
			}
			b.StopTimer()
			if err := RemoveBundle(bundle); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		slices.Sort(took)
		med := took[len(took)/2]
		b.ReportMetric(float64(med.Microseconds())/1000, "ms")
		if med > 50*time.Millisecond {
			b.Errorf("a second container's rootfs from existing snapshots took %v; target <= 50ms", med)
		}
	})

	b.Run("empty-layer", func(b *testing.B) {
		layers := make([]v1.Layer, MaxLayers)
		for i := range layers {
			layers[i] = gz(b) // an empty tar, as the hostile image's
		}
		// Read back from an OCI layout, as the runtime reads its content
		// store (a mutate.Image recomputes its config for every layer).
		p, err := layout.Write(next("layout"), empty.Index)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.AppendImage(imageOf(b, layers...)); err != nil {
			b.Fatal(err)
		}
		idx, _ := p.ImageIndex()
		im, _ := idx.IndexManifest()
		many, err := p.Image(im.Manifests[0].Digest)
		if err != nil {
			b.Fatal(err)
		}
		var per []time.Duration
		for b.Loop() {
			for range 5 {
				snaps, err := OpenSnapshots(next("snapshots"))
				if err != nil {
					b.Fatal(err)
				}
				bundle := next("bundle")
				start := time.Now()
				if _, err := Unpack(ctx, many, bundle, Options{Snapshotter: Overlayfs, Snapshots: snaps}); err != nil {
					b.Fatal(err)
				}
				per = append(per, time.Since(start)/MaxLayers)
				if err := RemoveBundle(bundle); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(snaps.Root)
			}
		}
		b.ReportMetric(float64(best(per).Microseconds()), "us/layer")
		if best(per) >= time.Millisecond {
			b.Errorf("an empty layer cost %v in snapshot mode; target < 1ms", best(per))
		}
	})
}
