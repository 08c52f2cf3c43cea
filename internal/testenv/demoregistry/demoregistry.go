// Package demoregistry serves the demo images (make images) from an
// in-process registry, for tests. It is apart from testenv because it
// imports steps/registry, whose own dependencies' tests use testenv.
package demoregistry

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/podlab/podlab/internal/testenv"
	podregistry "github.com/podlab/podlab/steps/registry"
)

// ImagesDir is where `make images` put the demo images:
// $PODLAB_DEMO_IMAGES, else /var/lib/podlab/demo-images.
func ImagesDir(t testing.TB) string {
	t.Helper()
	for _, d := range []string{os.Getenv("PODLAB_DEMO_IMAGES"), "/var/lib/podlab/demo-images"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "index.json")); err == nil {
			return d
		}
	}
	testenv.Missing(t, "no demo images in /var/lib/podlab/demo-images: run `make images`")
	return ""
}

// Serve is an in-process registry (ggcr's, closed when the test
// ends) holding the demo images: it answers HOST/podlab/hello:1.0 and
// HOST/library/nginx:latest. It returns HOST (127.0.0.1:PORT).
func Serve(t testing.TB) string {
	t.Helper()
	dir := ImagesDir(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, err := podregistry.Load(context.Background(), host, dir); err != nil {
		t.Fatalf("loading the demo images into the test registry: %v", err)
	}
	return host
}
