package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	specv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/pull"
)

// demoLayout writes an OCI layout with two named images, one named index
// and one unnamed image, and returns its directory and the named entries.
func demoLayout(t *testing.T) (string, map[string]v1.Hash) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo-images")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]v1.Hash{}
	for _, ref := range []string{"library/nginx:latest", "podlab/hello:1.0", ""} {
		img, err := random.Image(1024, 3)
		if err != nil {
			t.Fatal(err)
		}
		var opts []layout.Option
		if ref != "" {
			opts = append(opts, layout.WithAnnotations(map[string]string{specv1.AnnotationRefName: ref}))
			named[ref], _ = img.Digest()
		}
		if err := p.AppendImage(img, opts...); err != nil {
			t.Fatal(err)
		}
	}
	ii, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(ii, layout.WithAnnotations(map[string]string{specv1.AnnotationRefName: "podlab/multi:1"})); err != nil {
		t.Fatal(err)
	}
	named["podlab/multi:1"], _ = ii.Digest()
	return dir, named
}

// startRegistry starts a registry on a free loopback port until the test ends.
func startRegistry(t *testing.T, opts Options) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestLoad_PullBackByName(t *testing.T) {
	ctx := context.Background()
	dir, named := demoLayout(t)
	blobDir := filepath.Join(t.TempDir(), "registry")
	addr := startRegistry(t, Options{BlobDir: blobDir})

	loaded, err := Load(ctx, addr, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != len(named) {
		t.Fatalf("loaded %d images, want %d (the unnamed one skipped): %+v", len(loaded), len(named), loaded)
	}
	for _, l := range loaded {
		if l.Digest != named[l.Ref] {
			t.Errorf("%s: loaded digest %s, layout has %s", l.Ref, l.Digest, named[l.Ref])
		}
		if l.Reference != addr+"/"+l.Ref {
			t.Errorf("%s: reference %q, want %q", l.Ref, l.Reference, addr+"/"+l.Ref)
		}
		if len(l.Uploaded) != l.Blobs || l.Blobs == 0 {
			t.Errorf("%s: uploaded %d of %d blobs into an empty registry", l.Ref, len(l.Uploaded), l.Blobs)
		}
	}

	// Pull each back by name, as a runtime would, and find its blobs on disk.
	for _, ref := range []string{"library/nginx:latest", "podlab/hello:1.0"} {
		r, err := name.ParseReference(addr + "/" + ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s: %v", r, err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d != named[ref] {
			t.Errorf("pulled %s: digest %s, layout has %s", ref, d, named[ref])
		}
		mf, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, desc := range append(mf.Layers, mf.Config) {
			if _, err := os.Stat(filepath.Join(blobDir, "sha256", desc.Digest.Hex)); err != nil {
				t.Errorf("%s: blob %s not on disk: %v", ref, desc.Digest, err)
			}
		}
		// And the layers are whole: read one to its end (ggcr checks the digest there).
		layers, _ := img.Layers()
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Errorf("%s: reading layer 0: %v", ref, err)
		}
		rc.Close()
	}
	if _, err := remote.Index(mustRef(t, addr+"/podlab/multi:1"), remote.WithContext(ctx)); err != nil {
		t.Errorf("pulling the index: %v", err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoad_SecondLoadUploadsNoBlob(t *testing.T) {
	ctx := context.Background()
	dir, named := demoLayout(t)
	blobDir := filepath.Join(t.TempDir(), "registry")

	first := startRegistry(t, Options{BlobDir: blobDir})
	if _, err := Load(ctx, first, dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		addr string
	}{
		{"same registry again", first},
		// A restarted registry: manifests gone (they were in memory), blobs on disk.
		{"new registry, same blob directory", startRegistry(t, Options{BlobDir: blobDir})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loaded, err := Load(ctx, tt.addr, dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range loaded {
				if len(l.Uploaded) != 0 {
					t.Errorf("%s: uploaded %v again", l.Ref, l.Uploaded)
				}
			}
			img, err := remote.Image(mustRef(t, tt.addr+"/podlab/hello:1.0"), remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := img.Digest(); d != named["podlab/hello:1.0"] {
				t.Errorf("digest %s, want %s", d, named["podlab/hello:1.0"])
			}
		})
	}
}

func TestRun_LoadsThenServes(t *testing.T) {
	dir, named := demoLayout(t)
	blobDir := filepath.Join(t.TempDir(), "registry")
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var logs testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	readyc := make(chan []Loaded, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, dir, Options{BlobDir: blobDir, Log: &logs}, func(l []Loaded) { readyc <- l })
	}()

	select {
	case loaded := <-readyc:
		if len(loaded) != len(named) {
			t.Errorf("ready with %d images, want %d", len(loaded), len(named))
		}
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run never became ready")
	}
	if logs.String() != "" {
		t.Errorf("loading was logged without LogLoads:\n%s", logs.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz = %d after loading", resp.StatusCode)
	}

	if _, err := remote.Image(mustRef(t, addr+"/library/nginx:latest")); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	for _, want := range []string{"GET  /v2/ 200", "/v2/library/nginx/manifests/latest 200", "GET  /healthz 200"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the registry still listens after Run returned")
	}
}

// The blob directory removed while the registry serves (podlab reset
// does it, lesson 13): pulls still work, the blobs read from the layout
// the registry loaded, and a push makes the directory again.
func TestRun_BlobDirRemoved(t *testing.T) {
	dir, _ := demoLayout(t)
	blobDir := filepath.Join(t.TempDir(), "registry")
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	readyc := make(chan []Loaded, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ln, dir, Options{BlobDir: blobDir}, func(l []Loaded) { readyc <- l }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-readyc:
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run never became ready")
	}
	if err := os.RemoveAll(blobDir); err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(mustRef(t, addr+"/podlab/hello:1.0"))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatalf("a layer after the blob directory went: %v", err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatalf("reading a layer after the blob directory went: %v", err)
		}
		rc.Close()
	}
	if _, err := img.RawConfigFile(); err != nil {
		t.Errorf("the config after the blob directory went: %v", err)
	}
	pushed, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustRef(t, addr+"/pushed:1"), pushed); err != nil {
		t.Errorf("a push after the blob directory went: %v", err)
	}
	if _, err := os.Stat(blobDir); err != nil {
		t.Errorf("the push did not make the blob directory again: %v", err)
	}
}

func TestBadInputs(t *testing.T) {
	ctx := context.Background()
	unnamed := filepath.Join(t.TempDir(), "unnamed")
	p, err := layout.Write(unnamed, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(100, 1)
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "demo-images")
	// a named image whose config is over the 4 MiB a runtime accepts
	bigConfig := filepath.Join(t.TempDir(), "big-config")
	bp, err := layout.Write(bigConfig, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{"pad": strings.Repeat("x", pull.MaxConfigSize)}
	big, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := bp.AppendImage(big, layout.WithAnnotations(map[string]string{specv1.AnnotationRefName: "hostile/big:1"})); err != nil {
		t.Fatal(err)
	}
	addr := startRegistry(t, Options{BlobDir: t.TempDir()})
	taken, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	tests := []struct {
		name    string
		run     func() error
		want    error  // errors.Is, when set
		wantMsg string // in the message
	}{
		{"Load: missing layout", func() error { _, err := Load(ctx, addr, missing); return err }, ErrNoLayout, "make images"},
		{"Load: layout without ref names", func() error { _, err := Load(ctx, addr, unnamed); return err }, ErrNoImages, "org.opencontainers.image.ref.name"},
		{"Load: nobody at the address", func() error {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			a := ln.Addr().String()
			ln.Close()
			dir, _ := demoLayout(t)
			_, err := Load(ctx, a, dir)
			return err
		}, nil, "pushing"},
		{"Load: config over 4 MiB", func() error { _, err := Load(ctx, addr, bigConfig); return err }, pull.ErrTooLarge, "4194304 bytes (4 MiB)"},
		{"Listen: address in use", func() error { _, err := Listen(taken.Addr().String()); return err }, ErrAddrInUse, "--addr"},
		{"Serve: no blob directory", func() error {
			ln, _ := Listen("127.0.0.1:0")
			return Serve(ctx, ln, Options{})
		}, nil, "no blob directory"},
		{"Run: missing layout", func() error {
			ln, _ := Listen("127.0.0.1:0")
			return Run(ctx, ln, missing, Options{BlobDir: t.TempDir()}, nil)
		}, ErrNoLayout, "make images"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v is not %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q lacks %q", err, tt.wantMsg)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:5001":   "127.0.0.1:5001",
		"[::]:5001":      "127.0.0.1:5001",
		"127.0.0.1:5001": "127.0.0.1:5001",
	} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopback(a); got != want {
			t.Errorf("loopback(%s) = %s, want %s", in, got, want)
		}
	}
}

// A runtime that uses the registry as a mirror (containerd's hosts.toml)
// asks for the repository without its registry's host and names the host
// in ?ns=: registry.k8s.io/pause:3.10.2 is GET
// /v2/pause/manifests/3.10.2?ns=registry.k8s.io, docker.io/library/nginx
// is /v2/library/nginx/...?ns=docker.io. The layout's names are those
// paths, so both are served.
func TestRun_ServesMirrorRequests(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-images")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]v1.Hash{}
	for _, ref := range []string{"pause:3.10.2", "library/nginx:latest"} {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		want[ref], _ = img.Digest()
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{specv1.AnnotationRefName: ref})); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	readyc := make(chan []Loaded, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, dir, Options{BlobDir: filepath.Join(t.TempDir(), "registry")}, func(l []Loaded) { readyc <- l })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-readyc:
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run never became ready")
	}

	tests := []struct {
		name, path, ref string
		wantStatus      int
	}{
		{"pause through registry.k8s.io's mirror", "/v2/pause/manifests/3.10.2?ns=registry.k8s.io", "pause:3.10.2", 200},
		{"nginx through docker.io's mirror", "/v2/library/nginx/manifests/latest?ns=docker.io", "library/nginx:latest", 200},
		{"pause without ns", "/v2/pause/manifests/3.10.2", "pause:3.10.2", 200},
		{"an older pause", "/v2/pause/manifests/3.9?ns=registry.k8s.io", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+tt.path, nil)
			req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.wantStatus)
			}
			if tt.ref != "" {
				if got := resp.Header.Get("Docker-Content-Digest"); got != want[tt.ref].String() {
					t.Errorf("GET %s: digest %s, want %s's %s", tt.path, got, tt.ref, want[tt.ref])
				}
			}
		})
	}
}

// A client that waits for GET /v2/ to answer and then pulls at once, as a
// readiness probe followed by a pull does, finds every tag: the registry
// answers /v2/ only once its images are loaded, and 503 (UNAVAILABLE, with
// Retry-After) before. Forty images make loading take long enough that a
// registry answering early is caught.
func TestRun_AnswersV2OnlyWhenLoaded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-images")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	const images = 40
	for i := range images {
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		ref := map[string]string{specv1.AnnotationRefName: fmt.Sprintf("podlab/many-%02d:1", i)}
		if err := p.AppendImage(img, layout.WithAnnotations(ref)); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, dir, Options{BlobDir: filepath.Join(t.TempDir(), "registry")}, nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	sawUnavailable := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("GET /v2/ never answered 200")
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), `"UNAVAILABLE"`) || !strings.Contains(string(body), "loading its images") {
			t.Fatalf("GET /v2/ while loading = %d %q (Retry-After %q), want 503 UNAVAILABLE with Retry-After",
				resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
		sawUnavailable = true
		time.Sleep(2 * time.Millisecond)
	}
	last := fmt.Sprintf("%s/podlab/many-%02d:1", addr, images-1)
	if _, err := remote.Image(mustRef(t, last)); err != nil {
		t.Fatalf("pull right after /v2/ answered 200: %v", err)
	}
	if !sawUnavailable {
		t.Log("loading finished before the first probe (no 503 seen)")
	}
}
