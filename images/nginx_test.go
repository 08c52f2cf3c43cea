package images

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/podlab/podlab/internal/testenv"
)

// debCache is where the nginx .debs are: $PODLAB_DEB_CACHE (what `make`
// passes, <state>/cache/debs after `make images`), else images/out/debs.
// Without them the nginx tests are skipped (and fail in CI), as they would
// need the network.
func debCache(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PODLAB_DEB_CACHE")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), "images", "out", "debs")
	}
	for _, p := range nginxPackages() {
		if cachedDeb(dir, p) == "" {
			testenv.Missing(t, "no %s_*.deb in %s: run `make images`, or set PODLAB_DEB_CACHE to a directory holding the nginx .debs", p, dir)
		}
	}
	return dir
}

func nginxRoot(t *testing.T) *NginxRoot {
	t.Helper()
	r, err := PrepareNginxRoot(context.Background(), filepath.Join(t.TempDir(), "root"), NginxRootOptions{CacheDir: debCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func nginxImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := Nginx(context.Background(), nginxRoot(t).Dir)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestPrepareNginxRoot(t *testing.T) {
	r := nginxRoot(t)
	if len(r.Debs) != 2 {
		t.Errorf("extracted %q, want the nginx and nginx-common .debs", r.Debs)
	}
	var names []string
	for _, l := range r.Libs {
		names = append(names, l.Name)
		if _, err := os.Stat(filepath.Join(r.Dir, l.Path)); err != nil {
			t.Errorf("library %s: %v", l.Name, err)
		}
	}
	for _, want := range []string{"libc.so.6", "libcrypt.so.1", "libcrypto.so.3", "libpcre2-8.so.0", "libssl.so.3", "libz.so.1"} {
		if !slices.Contains(names, want) {
			t.Errorf("libraries %q lack %s", names, want)
		}
	}
	interp, _, err := elfDeps(filepath.Join(r.Dir, "usr/sbin/nginx"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, interp)); err != nil {
		t.Errorf("the loader %s is not in the root: %v", interp, err)
	}
}

func TestNginx_Image(t *testing.T) {
	root := nginxRoot(t)
	img, err := Nginx(context.Background(), root.Dir)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.MediaType != types.OCIManifestSchema1 || mf.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types %q, %q", mf.MediaType, mf.Config.MediaType)
	}
	if len(mf.Layers) != 4 {
		t.Fatalf("%d layers, want 4", len(mf.Layers))
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := append(cf.Config.Entrypoint, cf.Config.Cmd...); !slices.Equal(got, []string{"nginx", "-g", "daemon off;"}) {
		t.Errorf("command %q", got)
	}
	if _, ok := cf.Config.ExposedPorts["80/tcp"]; !ok {
		t.Errorf("ExposedPorts %v lacks 80/tcp", cf.Config.ExposedPorts)
	}
	if len(cf.History) != 4 {
		t.Errorf("%d history entries, want 4", len(cf.History))
	}

	layers := layerFiles(t, img)
	in := func(layer int, names ...string) {
		t.Helper()
		for _, n := range names {
			if layers[layer][n] == nil {
				t.Errorf("layer %d lacks %s", layer+1, n)
			}
		}
	}
	in(0, "etc/passwd", "etc/group", "tmp", "run")
	in(1, "lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libssl.so.3", "lib64/ld-linux-x86-64.so.2")
	in(2, "usr/sbin/nginx")
	in(3, "etc/nginx/nginx.conf", "etc/nginx/sites-enabled/default", "var/www/html/index.html", "var/lib/nginx", "var/log/nginx/access.log")
	if h := layers[3]["etc/nginx/sites-enabled/default"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "../sites-available/default" {
		t.Errorf("sites-enabled/default = %+v, want a link to ../sites-available/default", h)
	}
	if h := layers[3]["var/log/nginx/error.log"]; h == nil || h.Linkname != "/dev/stderr" {
		t.Errorf("error.log = %+v, want a link to /dev/stderr", h)
	}
	for i, l := range layers {
		for name := range l {
			for _, s := range skippedPaths() {
				if name == s || strings.HasPrefix(name, s+"/") {
					t.Errorf("layer %d has %s, which the recipe leaves out", i+1, name)
				}
			}
		}
	}
	files := flatten(t, img)
	if !strings.Contains(string(files["etc/passwd"]), "www-data:x:33:33:") {
		t.Errorf("/etc/passwd lacks www-data:\n%s", files["etc/passwd"])
	}

	again, err := Nginx(context.Background(), root.Dir)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same root gave two digests: %s, %s", d1, d2)
	}
}

func TestNginx_Bad(t *testing.T) {
	noLibs := t.TempDir()
	// A root with the binary but not its libraries.
	if err := os.MkdirAll(filepath.Join(noLibs, "usr/sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // any dynamically linked ELF would do; a test binary has an interpreter
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFile(self, filepath.Join(noLibs, "usr/sbin/nginx")); err != nil {
		t.Fatal(err)
	}
	interp, _, err := elfDeps(self)
	if err != nil {
		t.Fatal(err)
	}
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"Nginx: empty root", func() error { _, err := Nginx(context.Background(), t.TempDir()); return err }, "no usr/sbin/nginx"},
		{"PrepareNginxRoot: no cache dir", func() error {
			_, err := PrepareNginxRoot(context.Background(), t.TempDir(), NginxRootOptions{})
			return err
		}, "no .deb cache directory"},
		{"PrepareNginxRoot: root not empty", func() error {
			_, err := PrepareNginxRoot(context.Background(), notEmpty, NginxRootOptions{CacheDir: t.TempDir()})
			return err
		}, "is not empty"},
		{"BuildAll: no cache dir", func() error {
			_, err := BuildAll(context.Background(), t.TempDir(), BuildOptions{})
			return err
		}, "no .deb cache directory"},
	}
	if interp != "" { // a static test binary (CGO_ENABLED=0) has no loader to miss
		tests = append(tests, struct {
			name    string
			run     func() error
			wantErr string
		}{"Nginx: no libraries", func() error { _, err := Nginx(context.Background(), noLibs); return err }, "the loader"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
