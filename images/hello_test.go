package images

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/podlab/podlab/internal/testenv"
)

// helloBinary is built once for all tests by TestMain.
var helloBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "podlab-images-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helloBinary = filepath.Join(dir, "hello")
	if err := BuildHello(context.Background(), testenv.RepoRoot(), helloBinary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func helloImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := Hello(context.Background(), HelloOptions{Binary: helloBinary})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerFiles lists each layer's tar entries: name -> header.
func layerFiles(t *testing.T, img v1.Image) []map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]*tar.Header
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]*tar.Header{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
		out = append(out, files)
	}
	return out
}

// flatten reads the image as a runtime would unpack it (whiteouts applied).
func flatten(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[strings.TrimSuffix(h.Name, "/")] = b
	}
}

func TestHello_MediaTypesAndConfig(t *testing.T) {
	img := helloImage(t)
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type = %q, %v; want %q", mt, err, types.OCIManifestSchema1)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type = %q, want %q", mf.Config.MediaType, types.OCIConfigJSON)
	}
	if len(mf.Layers) != 4 {
		t.Fatalf("%d layers, want 4", len(mf.Layers))
	}
	for i, l := range mf.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer %d media type = %q, want %q", i, l.MediaType, types.OCILayer)
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/hello"}) || !slices.Equal(c.Cmd, []string{"--listen", ":8080"}) {
		t.Errorf("Entrypoint %q Cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "10001:10001" || c.WorkingDir != "/srv/www" {
		t.Errorf("User %q WorkingDir %q", c.User, c.WorkingDir)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("ExposedPorts %v lacks 8080/tcp", c.ExposedPorts)
	}
	if !slices.Contains(c.Env, "GREETING=Hello from podlab/hello") {
		t.Errorf("Env %q lacks GREETING", c.Env)
	}
	if cf.OS != "linux" || cf.Architecture == "" || !cf.Created.Time.Equal(epoch()) {
		t.Errorf("OS %q Architecture %q Created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if len(cf.History) != 4 || len(cf.RootFS.DiffIDs) != 4 {
		t.Fatalf("%d history entries, %d diff IDs; want 4 each", len(cf.History), len(cf.RootFS.DiffIDs))
	}
	for i, h := range cf.History {
		if h.CreatedBy == "" || h.Comment == "" || h.EmptyLayer {
			t.Errorf("history %d = %+v, want a command and a comment", i, h)
		}
	}
	if !strings.Contains(cf.History[3].Comment, "whiteout") || !strings.Contains(cf.History[3].Comment, "opaque") {
		t.Errorf("history of layer 4 does not explain its whiteouts: %q", cf.History[3].Comment)
	}
}

func TestHello_WhiteoutsInTheirLayer(t *testing.T) {
	layers := layerFiles(t, helloImage(t))
	want := []struct {
		has, lacks []string
	}{
		{has: []string{"etc/passwd", "etc/group", "tmp"}, lacks: []string{"hello"}},
		{has: []string{"etc/motd", "srv/www/index.html", "srv/www/old.html"}},
		{has: []string{"hello"}},
		{has: []string{"etc/.wh.motd", "srv/www/.wh..wh..opq", "srv/www/index.html"}, lacks: []string{"etc/motd", "srv/www/old.html"}},
	}
	for i, w := range want {
		for _, f := range w.has {
			if layers[i][f] == nil {
				t.Errorf("layer %d lacks %s", i+1, f)
			}
		}
		for _, f := range w.lacks {
			if layers[i][f] != nil {
				t.Errorf("layer %d has %s", i+1, f)
			}
		}
		if i < 3 {
			for name := range layers[i] {
				if strings.Contains(name, WhiteoutPrefix) {
					t.Errorf("layer %d has a whiteout %s; only layer 4 should", i+1, name)
				}
			}
		}
		for name, h := range layers[i] {
			if !h.ModTime.Equal(epoch()) || h.Uid != 0 || h.Gid != 0 {
				t.Errorf("layer %d: %s dated %v owned %d:%d, want %v 0:0", i+1, name, h.ModTime, h.Uid, h.Gid, epoch())
			}
		}
	}
	if h := layers[0]["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp is %+v, want mode 1777", h)
	}
	if h := layers[2]["hello"]; h == nil || h.Mode != 0o755 {
		t.Errorf("/hello is %+v, want mode 755", h)
	}
}

func TestHello_Unpacked(t *testing.T) {
	files := flatten(t, helloImage(t))
	for _, gone := range []string{"etc/motd", "srv/www/old.html", "etc/.wh.motd", "srv/www/.wh..wh..opq"} {
		if _, ok := files[gone]; ok {
			t.Errorf("the unpacked image has %s", gone)
		}
	}
	if got := string(files["srv/www/index.html"]); !strings.Contains(got, "version 2") {
		t.Errorf("srv/www/index.html = %q, want version 2", got)
	}
	if !strings.Contains(string(files["etc/passwd"]), "app:x:10001:10001:") {
		t.Errorf("/etc/passwd lacks the app user:\n%s", files["etc/passwd"])
	}
	if !strings.Contains(string(files["etc/group"]), "app:x:10001:") {
		t.Errorf("/etc/group lacks the app group:\n%s", files["etc/group"])
	}
	if len(files["hello"]) == 0 {
		t.Error("the unpacked image has no /hello")
	}
}

func TestHello_Reproducible(t *testing.T) {
	// A second, separate build of the program and of the image.
	bin2 := filepath.Join(t.TempDir(), "hello")
	if err := BuildHello(context.Background(), testenv.RepoRoot(), bin2); err != nil {
		t.Fatal(err)
	}
	img2, err := Hello(context.Background(), HelloOptions{Binary: bin2})
	if err != nil {
		t.Fatal(err)
	}
	d1, err := helloImage(t).Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := img2.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds gave two digests: %s and %s", d1, d2)
	}
}

func TestHello_Bad(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "hello.sh")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, binary, wantErr string
	}{
		{"no binary", "", "no hello binary given"},
		{"missing binary", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"not an executable", notELF, "not a Linux (ELF) executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Hello(context.Background(), HelloOptions{Binary: tt.binary})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Hello(%q) error = %v, want one containing %q", tt.binary, err, tt.wantErr)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Hello(ctx, HelloOptions{Binary: helloBinary}); err == nil {
		t.Error("Hello with a cancelled context succeeded")
	}
}

func TestBuildHello_Bad(t *testing.T) {
	err := BuildHello(context.Background(), t.TempDir(), filepath.Join(t.TempDir(), "hello"))
	if err == nil || !strings.Contains(err.Error(), "building the hello program") {
		t.Fatalf("building outside the module: error = %v", err)
	}
}
