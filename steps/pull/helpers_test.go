package pull

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testRegistry is ggcr's in-memory registry behind a handler that records
// every request and can serve chosen blobs with one byte flipped.
type testRegistry struct {
	*httptest.Server
	Host string

	mu       sync.Mutex
	requests []string        // "GET /v2/demo/app/blobs/sha256:..."
	tamper   map[string]bool // blob digests served with a flipped byte
	truncate map[string]bool // blob digests served one byte short
}

func newTestRegistry(t testing.TB) *testRegistry {
	t.Helper()
	r := &testRegistry{tamper: map[string]bool{}, truncate: map[string]bool{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		d := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
		tamper := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") && r.tamper[d]
		truncate := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") && r.truncate[d]
		r.mu.Unlock()
		if tamper || truncate {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			b := rec.Body.Bytes()
			if tamper {
				b[len(b)/2] ^= 0xff
			} else {
				b = b[:len(b)-1]
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.Write(b)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.Host = strings.TrimPrefix(r.URL, "http://")
	return r
}

// reset forgets the requests seen so far (the pushes).
func (r *testRegistry) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

// seen returns the requests whose "METHOD /path" contains all of parts.
func (r *testRegistry) seen(parts ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.requests {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(q, p) }) {
			out = append(out, q)
		}
	}
	return out
}

func (r *testRegistry) setTamper(d v1.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper[d.String()] = true
}

func (r *testRegistry) setTruncate(d v1.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncate[d.String()] = true
}

// push writes img (or an index) to the registry as repo:tag and returns the
// full reference.
func (r *testRegistry) push(t testing.TB, repoTag string, img any) string {
	t.Helper()
	ref := r.Host + "/" + repoTag
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	switch img := img.(type) {
	case v1.Image:
		err = remote.Write(n, img)
	case v1.ImageIndex:
		err = remote.WriteIndex(n, img)
	}
	if err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return ref
}

// ociImage builds an OCI image (OCI media types throughout) for platform p
// with random layers and a config a learner would recognize.
func ociImage(t testing.TB, p v1.Platform, layerSizes ...int64) v1.Image {
	t.Helper()
	var layers []v1.Layer
	for _, size := range layerSizes {
		l, err := random.Layer(size, types.OCILayer)
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	return withLayers(t, ociBase(t, p), layers...)
}

func ociBase(t testing.TB, p v1.Platform) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Config.Entrypoint = []string{"/bin/hello"}
	cfg.Config.Cmd = []string{"--port", "8080"}
	cfg.Config.Env = []string{"PATH=/bin", "GREETING=hi"}
	cfg.Config.WorkingDir = "/srv"
	cfg.Config.User = "1000:1000"
	cfg.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func withLayers(t testing.TB, img v1.Image, layers ...v1.Layer) v1.Image {
	t.Helper()
	var adds []mutate.Addendum
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "COPY hello /bin/hello"}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// ociIndex builds an OCI image index with one image per platform, plus an
// attestation manifest (platform unknown/unknown) as buildx adds.
func ociIndex(t testing.TB, platforms ...string) (v1.ImageIndex, map[string]v1.Image) {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	imgs := map[string]v1.Image{}
	for _, s := range platforms {
		p, err := ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		img := ociImage(t, p, 1024)
		imgs[s] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	att := ociImage(t, v1.Platform{OS: "unknown", Architecture: "unknown"}, 100)
	idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: att,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}})
	return idx, imgs
}

func digestOf(t testing.TB, x interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	d, err := x.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "content"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshot is the store's blob file names, its index.json and its ingest
// directory, to show that a failed pull changed nothing.
type snapshot struct {
	blobs  []string
	index  []byte
	ingest []string
}

func snap(t testing.TB, s *Store) snapshot {
	t.Helper()
	var sn snapshot
	for _, d := range []struct {
		dir string
		out *[]string
	}{{filepath.Join(s.Dir(), "blobs", "sha256"), &sn.blobs}, {filepath.Join(s.Dir(), ingestDir), &sn.ingest}} {
		ents, err := os.ReadDir(d.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".lock") {
				*d.out = append(*d.out, e.Name())
			}
		}
	}
	b, err := os.ReadFile(s.IndexPath())
	if err != nil {
		t.Fatal(err)
	}
	sn.index = b
	return sn
}

func (a snapshot) equal(b snapshot) bool {
	return slices.Equal(a.blobs, b.blobs) && bytes.Equal(a.index, b.index) && slices.Equal(a.ingest, b.ingest)
}
