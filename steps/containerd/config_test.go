package containerd_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/statedir"
)

// dumpSections parses `containerd config dump` into section -> key -> value.
func dumpSections(out string) map[string]map[string]string {
	sections := map[string]map[string]string{"": {}}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			cur = strings.Trim(line, "[]")
			if sections[cur] == nil {
				sections[cur] = map[string]string{}
			}
		case strings.Contains(line, " = "):
			k, v, _ := strings.Cut(line, " = ")
			sections[cur][k] = v
		}
	}
	return sections
}

// containerd reads the rendered config.toml as podlab means it: each
// setting in the table that has it (containerd's own `config dump`, which
// prints the configuration it loaded, is the oracle).
func TestRender_ContainerdReadsIt(t *testing.T) {
	bin, err := containerd.Find()
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	state, err := statedir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := containerd.FromLayout(state, "/opt/podlab/bin/runc", "/usr/lib/cni")
	w, err := containerd.Write(cfg, "http://127.0.0.1:5001")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", w.Config, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, out)
	}
	got := dumpSections(string(out))
	l := state.Containerd()
	q := func(s string) string { return `"` + s + `"` }
	const cri = `plugins."io.containerd.grpc.v1.cri"`
	want := []struct{ section, key, value string }{
		{"", "version", "2"},
		{"", "root", q(l.Root())},
		{"", "state", q(l.State())},
		{"grpc", "address", q(l.Socket())},
		{`plugins."io.containerd.internal.v1.opt"`, "path", q(l.OptDir())},
		{cri, "sandbox_image", q("registry.k8s.io/pause:3.10.2")},
		{cri, "restrict_oom_score_adj", "true"},
		{cri, "netns_mounts_under_state_dir", "true"},
		{cri + ".containerd", "snapshotter", q("overlayfs")},
		{cri + ".containerd", "default_runtime_name", q("runc")},
		{cri + ".containerd.runtimes.runc", "runtime_type", q("io.containerd.runc.v2")},
		{cri + ".containerd.runtimes.runc.options", "BinaryName", q("/opt/podlab/bin/runc")},
		{cri + ".containerd.runtimes.runc.options", "Root", q(l.RuncRoot())},
		{cri + ".cni", "bin_dir", q("/usr/lib/cni")},
		{cri + ".cni", "conf_dir", q(l.CNIConfDir())},
		{cri + ".registry", "config_path", q(state.CertsDir())},
	}
	for _, w := range want {
		if v := got[w.section][w.key]; v != w.value {
			t.Errorf("[%s] %s = %s, want %s", w.section, w.key, v, w.value)
		}
	}

	// The mirrors: registry.k8s.io (pause) and docker.io (nginx, hello),
	// each naming the lab registry first, then its upstream.
	for host, server := range containerd.MirroredRegistries() {
		b, err := os.ReadFile(filepath.Join(state.CertsDir(), host, "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`server = "` + server + `"`, `[host."http://127.0.0.1:5001"]`, `capabilities = ["pull", "resolve"]`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s/hosts.toml lacks %s:\n%s", host, want, b)
			}
		}
	}
	if b, err := os.ReadFile(w.ConfList); err != nil || !strings.Contains(string(b), l.BridgeName()) || !strings.Contains(string(b), l.PodCIDR()) {
		t.Errorf("the conflist %s: %v, want bridge %s and subnet %s:\n%s", w.ConfList, err, l.BridgeName(), l.PodCIDR(), b)
	}
	if b, _ := os.ReadFile(w.Crictl); !strings.Contains(string(b), "runtime-endpoint: unix://"+l.Socket()) {
		t.Errorf("crictl.yaml does not name the socket:\n%s", b)
	}
}

func TestRender_Bad(t *testing.T) {
	state, _ := statedir.New(t.TempDir())
	good := containerd.FromLayout(state, "/usr/sbin/runc", "/usr/lib/cni")
	long, _ := statedir.New("/" + strings.Repeat("d", 90))
	tests := []struct {
		name    string
		edit    func(*containerd.Config)
		wantErr string
	}{
		{"relative runc", func(c *containerd.Config) { c.Runc = "bin/runc" }, "the runc binary \"bin/runc\" must be an absolute path"},
		{"no CNI directory", func(c *containerd.Config) { c.CNIBinDir = "" }, "the CNI plugin directory"},
		{"a quote in the state directory", func(c *containerd.Config) {
			q, _ := statedir.New(`/tmp/a"b`)
			c.Layout = q.Containerd()
		}, "a quote, backslash or control character"},
		{"a socket path too long", func(c *containerd.Config) { c.Layout = long.Containerd() }, "more than a unix socket's 107"},
		{"a sandbox image with a space", func(c *containerd.Config) { c.SandboxImage = "pause 3" }, "not an image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			_, err := containerd.Render(c)
			if !errors.Is(err, containerd.ErrBadConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Render: %v, want ErrBadConfig saying %q", err, tt.wantErr)
			}
		})
	}
	for _, mirror := range []string{"127.0.0.1:5001", "ftp://x", "http://", "http://h/path", `http://a"b`} {
		if _, err := containerd.Write(good, mirror); !errors.Is(err, containerd.ErrBadConfig) || !strings.Contains(err.Error(), "registry mirror") {
			t.Errorf("Write with mirror %q: %v, want ErrBadConfig about the registry mirror", mirror, err)
		}
	}
}

// Without containerd on PATH, Find says which Debian package to install.
func TestFind_NotInstalled(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	_, err := containerd.Find()
	if !errors.Is(err, containerd.ErrNotInstalled) || !strings.Contains(err.Error(), "Debian's package containerd") {
		t.Fatalf("Find without containerd: %v, want ErrNotInstalled naming the package", err)
	}
	// containerd without its shim is as good as none.
	real, err := exec.LookPath("/usr/bin/containerd")
	if err != nil {
		testenv.Missing(t, "containerd: %v", err)
	}
	if err := os.Symlink(real, filepath.Join(empty, "containerd")); err != nil {
		t.Fatal(err)
	}
	_, err = containerd.Find()
	if !errors.Is(err, containerd.ErrNotInstalled) || !strings.Contains(err.Error(), containerd.ShimBinary) {
		t.Fatalf("Find without the shim: %v, want ErrNotInstalled naming %s", err, containerd.ShimBinary)
	}
}

// Nothing answering: Ready gives up with ErrNotAnswering, saying where it
// looked and what it last heard, whether the socket is missing or a
// plain file.
func TestReady_NotAnswering(t *testing.T) {
	dir := t.TempDir()
	notSock := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(notSock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{filepath.Join(dir, "none.sock"), notSock} {
		_, err := containerd.Ready(context.Background(), sock, 300*time.Millisecond, nil)
		if !errors.Is(err, containerd.ErrNotAnswering) || !strings.Contains(err.Error(), "no socket at "+sock) {
			t.Errorf("Ready(%s): %v, want ErrNotAnswering saying there is no socket", sock, err)
		}
	}
}

// A containerd started by hand on the lab's config (no podlab containerd
// holds the claim) answers on the socket: Start refuses to start another
// and says how to use the one that runs.
func TestStart_RefusesWhenAContainerdAnswers(t *testing.T) {
	testenv.RequireRoot(t)
	bin, err := containerd.Find()
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	state, _ := statedir.New(t.TempDir())
	cfg := containerd.FromLayout(state, testenv.Runc(t), "/usr/lib/cni")
	if _, err := containerd.Write(cfg, ""); err != nil {
		t.Fatal(err)
	}
	byHand := exec.Command(bin, "--config", cfg.Layout.Config())
	if err := byHand.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { byHand.Process.Kill(); byHand.Wait() })
	if _, err := containerd.Ready(context.Background(), cfg.Layout.Socket(), 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	d, _, err := containerd.Start(context.Background(), cfg, bin, "", io.Discard)
	if d != nil {
		d.Stop(time.Second)
	}
	if !errors.Is(err, containerd.ErrRunning) || !strings.Contains(err.Error(), "crictl --runtime-endpoint unix://"+cfg.Layout.Socket()) {
		t.Fatalf("Start while a containerd answers: %v, want ErrRunning saying how to use it", err)
	}
}
