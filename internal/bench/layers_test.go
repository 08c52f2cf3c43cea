package bench

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/podlab/podlab/internal/testenv"
)

const (
	manyLayers        = 125 // unpack.MaxLayers: one more is refused
	filesPerManyLayer = 40  // small files in each, as a build step leaves
	manyLayerRounds   = 5
)

// BenchmarkManyLayers is the worst honest case of the layer-count bound
// (issue 15, hostile images: 10,000 empty layers took 24 ms a layer; now
// more than 125 are refused): an image of exactly 125 layers, each of 40
// small files (some replacing files of the layer below), unpacked by
// `podlab unpack --snapshotter overlayfs` into a fresh state directory's
// snapshots, against `tar -xzf` of the same 125 layers in order, side by
// side on a tmpfs. Target: at most tar's time; the cost per layer is
// reported (ms-per-layer).
func BenchmarkManyLayers(b *testing.B) {
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root, for the overlayfs snapshotter's mounts")
	}
	podlab := filepath.Join(testenv.RepoRoot(), "bin", "podlab")
	if _, err := os.Stat(podlab); err != nil {
		testenv.Missing(b, "bin/podlab (run make build)")
	}
	tarBin := testenv.LookPath(b, "tar")
	tmp := b.TempDir()
	img, files, err := manyLayerImage(tmp)
	if err != nil {
		b.Fatalf("building the %d-layer image: %v", manyLayers, err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	b.Cleanup(reg.Close)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/bench/layers:125"
	r, err := name.ParseReference(ref)
	if err != nil {
		b.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		b.Fatalf("pushing the %d-layer image: %v", manyLayers, err)
	}

	fast := tmpfs(b, filepath.Join(tmp, "tmpfs"))
	var ours, theirs []measurement
	for i := 0; i <= manyLayerRounds; i++ { // round 0 warms the caches and is not counted
		state := filepath.Join(fast, fmt.Sprintf("state-%d", i))
		bundle := filepath.Join(fast, fmt.Sprintf("bundle-%d", i))
		dir := filepath.Join(fast, fmt.Sprintf("tar-%d", i))
		run(b, podlab, "--state-dir", state, "pull", ref) // not timed
		script := fmt.Sprintf("mkdir -p %s && for l in %s; do %s -xzf $l -C %s || exit 1; done", dir, strings.Join(files, " "), tarBin, dir)
		var o, t measurement
		sides := []func(){
			func() {
				o = run(b, podlab, "--state-dir", state, "unpack", ref, "--snapshotter", "overlayfs", "--bundle", bundle)
			},
			func() { t = run(b, "sh", "-c", script) },
		}
		for j := range sides {
			sides[(i+j)%len(sides)]()
		}
		run(b, podlab, "--state-dir", state, "unpack", "--remove", "--bundle", bundle)
		os.RemoveAll(dir)
		os.RemoveAll(state)
		if i > 0 {
			ours, theirs = append(ours, o), append(theirs, t)
		}
	}
	compareWalls(b, fmt.Sprintf("unpack of %d layers into snapshots (vs tar -xzf)", manyLayers), ours, theirs, "layers-x-tar", 1.0, true)
	perLayer := ms(typical(ours).wall) / manyLayers
	fmt.Printf("%-50s podlab %9.2f ms a layer (it took 24 ms a layer before the bound)\n", "  the same, per layer", perLayer)
	b.ReportMetric(perLayer, "ms-per-layer")
}

// manyLayerImage is an image of manyLayers gzip layers of small files, and
// its layer blobs written under dir, in order.
func manyLayerImage(dir string) (v1.Image, []string, error) {
	var layers []v1.Layer
	var files []string
	body := bytes.Repeat([]byte("a layer of a build step, many of them stacked\n"), 40)
	for i := 0; i < manyLayers; i++ {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		d := fmt.Sprintf("app/step%03d/", i)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, nil, err
		}
		for j := 0; j < filesPerManyLayer; j++ {
			p := fmt.Sprintf("%sf%d", d, j)
			if i > 0 && j%10 == 0 { // replace a file of the layer below
				p = fmt.Sprintf("app/step%03d/f%d", i-1, j)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
				return nil, nil, err
			}
			if _, err := tw.Write(body); err != nil {
				return nil, nil, err
			}
		}
		if err := tw.Close(); err != nil {
			return nil, nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("layer%03d.tar.gz", i))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return nil, nil, err
		}
		l, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, nil, err
		}
		layers, files = append(layers, l), append(files, p)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return img, files, nil
}
