package pull

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// writeHosts writes <dir>/<host>/hosts.toml.
func writeHosts(t *testing.T, dir, host, body string) string {
	t.Helper()
	p := HostsFile(dir, host)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// queryRegistry is ggcr's registry recording each request's query.
func queryRegistry(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var qs []string
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		qs = append(qs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), qs...) }
}

// TestPull_HostsDir: hosts.toml, read with containerd's parser, sends
// docker.io pulls to its mirrors in order, then to its server, as
// containerd does; each request to a mirror carries ?ns=docker.io.
func TestPull_HostsDir(t *testing.T) {
	img := ociImage(t, v1.Platform{OS: "linux", Architecture: "amd64"}, 100)
	live, queries := queryRegistry(t)
	liveHost := strings.TrimPrefix(live.URL, "http://")
	(&testRegistry{Host: liveHost}).push(t, "library/nginx:latest", img)
	dead := deadAddr(t)

	tests := []struct {
		name       string
		hosts      string
		wantSource string
		wantMirror string
	}{
		{"the mirror first", "server = \"http://" + dead + "\"\n[host.\"http://" + liveHost + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
			liveHost + "/library/nginx", "http://" + liveHost},
		{"a dead mirror, then the next", "server = \"http://" + dead + "\"\n[host.\"http://" + dead + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n[host.\"http://" + liveHost + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
			liveHost + "/library/nginx", "http://" + liveHost},
		{"a dead mirror, then the server", "server = \"http://" + liveHost + "\"\n[host.\"http://" + dead + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
			liveHost + "/library/nginx", ""},
		{"a mirror that may not resolve is skipped", "server = \"http://" + liveHost + "\"\n[host.\"http://" + dead + "\"]\n  capabilities = [\"pull\"]\n",
			liveHost + "/library/nginx", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHosts(t, dir, "docker.io", tt.hosts)
			res, err := Pull(context.Background(), openStore(t), "nginx", Options{HostsDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != tt.wantSource || res.Mirror != tt.wantMirror || res.Reference != "docker.io/library/nginx:latest" {
				t.Errorf("Source %q, Mirror %q, Reference %q; want %q, %q", res.Source, res.Mirror, res.Reference, tt.wantSource, tt.wantMirror)
			}
			if res.HostsFile != HostsFile(dir, "docker.io") {
				t.Errorf("HostsFile = %q", res.HostsFile)
			}
		})
	}

	// Requests to a mirror say which registry they stand in for.
	var withNS int
	for _, q := range queries() {
		if strings.Contains(q, "/manifests/") && strings.Contains(q, "ns=docker.io") {
			withNS++
		}
	}
	if withNS == 0 {
		t.Errorf("no manifest request to a mirror carried ?ns=docker.io: %q", queries())
	}
}

// TestPull_HostsDir_Bad: what hosts.toml cannot do, and a mirror flag that
// wins over it.
func TestPull_HostsDir_Bad(t *testing.T) {
	dead, dead2 := deadAddr(t), deadAddr(t)
	reg := newTestRegistry(t)
	reg.push(t, "library/nginx:latest", ociImage(t, v1.Platform{OS: "linux", Architecture: "amd64"}, 100))

	t.Run("nothing answers: the error names each host and the file", func(t *testing.T) {
		dir := t.TempDir()
		file := writeHosts(t, dir, "docker.io", "server = \"http://"+dead2+"\"\n[host.\"http://"+dead+"\"]\n  capabilities = [\"pull\", \"resolve\"]\n")
		_, err := Pull(context.Background(), openStore(t), "nginx", Options{HostsDir: dir})
		if !errors.Is(err, ErrRegistryUnreachable) {
			t.Fatalf("err = %v, want ErrRegistryUnreachable", err)
		}
		for _, want := range []string{"the mirror http://" + dead, "then the registry http://" + dead2, file} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error lacks %q:\n%v", want, err)
			}
		}
	})
	t.Run("--registry-mirror wins over hosts.toml", func(t *testing.T) {
		dir := t.TempDir()
		writeHosts(t, dir, "docker.io", "server = \"http://"+dead2+"\"\n[host.\"http://"+dead+"\"]\n  capabilities = [\"pull\", \"resolve\"]\n")
		res, err := Pull(context.Background(), openStore(t), "nginx", Options{HostsDir: dir, Mirror: reg.URL})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mirror != reg.URL || res.HostsFile != "" {
			t.Errorf("Mirror %q, HostsFile %q", res.Mirror, res.HostsFile)
		}
	})
	t.Run("a path other than /v2 is refused", func(t *testing.T) {
		dir := t.TempDir()
		writeHosts(t, dir, "docker.io", "[host.\"http://"+reg.Host+"/other\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n")
		_, err := Pull(context.Background(), openStore(t), "nginx", Options{HostsDir: dir})
		if err == nil || !strings.Contains(err.Error(), "override_path") {
			t.Fatalf("err = %v, want one naming override_path", err)
		}
	})
	t.Run("another registry's file is not read", func(t *testing.T) {
		dir := t.TempDir()
		writeHosts(t, dir, "docker.io", "server = \"http://"+dead+"\"\n")
		ref := reg.Host + "/library/nginx:latest"
		if _, err := Pull(context.Background(), openStore(t), ref, Options{HostsDir: dir}); err != nil {
			t.Fatal(err)
		}
	})
}
