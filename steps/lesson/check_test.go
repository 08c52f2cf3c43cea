package lesson_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/lesson"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/store"

	"github.com/podlab/podlab/steps/statedir"
)

// results maps each check's name to its result.
func results(t *testing.T, n int, env lesson.Env) map[string]lesson.Result {
	t.Helper()
	out := map[string]lesson.Result{}
	for _, r := range lesson.Check(context.Background(), n, env) {
		if r.Name == "" {
			t.Errorf("lesson %d: a check has no name", n)
		}
		if !r.OK && r.Hint == "" {
			t.Errorf("lesson %d: %q failed with no hint", n, r.Name)
		}
		out[r.Name] = r
	}
	return out
}

// wantResults fails the test unless each named check came out as ok says;
// "*" stands for every check.
func wantResults(t *testing.T, got map[string]lesson.Result, want map[string]bool) {
	t.Helper()
	if all, ok := want["*"]; ok {
		for name, r := range got {
			if _, named := want[name]; !named && r.OK != all {
				t.Errorf("%q: OK=%v (%s), want %v", name, r.OK, r.Hint, all)
			}
		}
	}
	for name, ok := range want {
		if name == "*" {
			continue
		}
		r, found := got[name]
		if !found {
			t.Errorf("no check %q (checks: %v)", name, keys(got))
			continue
		}
		if r.OK != ok {
			t.Errorf("%q: OK=%v (%s), want %v", name, r.OK, r.Hint, ok)
		}
	}
}

func keys(m map[string]lesson.Result) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// deadRegistry is an address where nothing listens.
func deadRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHasChecks(t *testing.T) {
	for n := 1; n <= 13; n++ {
		if !lesson.HasChecks(n) {
			t.Errorf("lesson %d has no checks", n)
		}
	}
	for _, n := range []int{0, 14, -1} {
		if lesson.HasChecks(n) {
			t.Errorf("lesson %d has checks", n)
		}
		if r := lesson.Check(context.Background(), n, lesson.Env{StateDir: t.TempDir()}); r != nil {
			t.Errorf("Check(%d) = %v, want nil", n, r)
		}
	}
}

// TestCheck_EmptyState: on a state directory where nothing was done, every
// check of lessons 02 to 12 fails with a hint, lesson 13's pass, and
// checking writes nothing.
func TestCheck_EmptyState(t *testing.T) {
	state := t.TempDir()
	env := lesson.Env{StateDir: state, Registry: deadRegistry(t), Runtime: "/nonexistent/runc"}
	wantResults(t, results(t, 1, env), map[string]bool{"the registry serves the demo images": false})
	for n := 2; n <= 12; n++ {
		got := results(t, n, env)
		if len(got) == 0 {
			t.Errorf("lesson %d: no results", n)
		}
		for name, r := range got {
			if r.OK {
				t.Errorf("lesson %d: %q passed on an empty state directory", n, name)
			}
		}
	}
	wantResults(t, results(t, 13, env), map[string]bool{"*": true})
	if entries, _ := os.ReadDir(state); len(entries) > 0 {
		t.Errorf("checking wrote into the state directory: %v", entries)
	}
}

// TestCheck_APIServer walks lessons 02 and 03 through the real API server.
func TestCheck_APIServer(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	env := lesson.Env{StateDir: state}
	if _, err := apiserver.Init(ctx, state); err != nil {
		t.Fatal(err)
	}
	// do runs fn with an admin client, then closes the API server, as a
	// podlab command does.
	do := func(fn func(c apiserver.Interface) error) {
		t.Helper()
		srv, err := apiserver.Open(state)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		c, err := srv.ClientAs("admin")
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(c); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "nginx"}}},
		}
	}

	wantResults(t, results(t, 2, env), map[string]bool{
		"the control plane is initialized (token file and store)": true,
		"pod web is stored": false,
	})
	do(func(c apiserver.Interface) error {
		if _, err := c.Create(ctx, pod("web")); err != nil {
			return err
		}
		_, err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locked",
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})
		return err
	})
	wantResults(t, results(t, 2, env), map[string]bool{"*": true})

	// Lesson 03: db comes and goes; then the history is compacted.
	do(func(c apiserver.Interface) error {
		_, err := c.Create(ctx, pod("db"))
		return err
	})
	wantResults(t, results(t, 2, env), map[string]bool{"the refused requests stored nothing": false})
	wantResults(t, results(t, 3, env), map[string]bool{"pod web reads back through the gate": true, "pod db was deleted": false})
	do(func(c apiserver.Interface) error {
		_, err := c.Delete(ctx, "pods", "default", "db", apiserver.DeleteOptions{})
		return err
	})
	wantResults(t, results(t, 3, env), map[string]bool{
		"pod web reads back through the gate": true,
		"pod db was deleted":                  true,
		"the store's history is compacted (a watch from revision 1 is 410 Gone)": false,
	})
	st, err := store.Open(store.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err == nil {
		err = st.Compact(ctx, rev)
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, results(t, 3, env), map[string]bool{"*": true})

	// Lesson 04 binds web: lesson 02's "Pending with no node" no longer holds.
	do(func(c apiserver.Interface) error {
		return c.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}})
	})
	got := results(t, 2, env)
	wantResults(t, got, map[string]bool{"pod web is Pending with no node": false})
	if h := got["pod web is Pending with no node"].Hint; !strings.Contains(h, "bound to node-1") {
		t.Errorf("hint %q does not say where web is bound", h)
	}
	wantResults(t, results(t, 4, env), map[string]bool{"a pod is bound to a node": true})
}

// helloBundle makes what lessons 07 and 08 leave: bundles/hello with the
// unpacked rootfs and hello's config.json.
func helloBundle(t *testing.T, state string) string {
	t.Helper()
	b := filepath.Join(state, "bundles", "hello")
	for _, d := range []string{"rootfs/etc", "rootfs/srv/www"} {
		if err := os.MkdirAll(filepath.Join(b, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"rootfs/hello", "rootfs/srv/www/index.html"} {
		if err := os.WriteFile(filepath.Join(b, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(b, 0o700); err != nil {
		t.Fatal(err)
	}
	mem, pids, quota := int64(64<<20), int64(64), int64(50000)
	writeSpec(t, b, &specs.Spec{
		Process: &specs.Process{Args: []string{"/hello"}, NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}}},
		Linux: &specs.Linux{CgroupsPath: statedir.Layout{Dir: filepath.Dir(filepath.Dir(b))}.CgroupRoot() + "/hello", Resources: &specs.LinuxResources{
			Memory: &specs.LinuxMemory{Limit: &mem},
			Pids:   &specs.LinuxPids{Limit: &pids},
			CPU:    &specs.LinuxCPU{Quota: &quota},
		}},
	})
	return b
}

func writeSpec(t *testing.T, bundle string, s *specs.Spec) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readSpec(t *testing.T, bundle string) *specs.Spec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestCheck_Bundle: the checks of lessons 07 and 08 pass on hello's
// bundle, and each catches what it is about.
func TestCheck_Bundle(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		breaks func(t *testing.T, bundle string)
		fails  []string
	}{
		{"as unpacked", 7, func(*testing.T, string) {}, nil},
		{"as written", 8, func(*testing.T, string) {}, nil},
		{"no rootfs", 7, func(t *testing.T, b string) { os.RemoveAll(filepath.Join(b, "rootfs")) }, []string{
			"bundle hello holds the image's rootfs", "the whiteout removed /etc/motd", "the opaque whiteout emptied /srv/www but for the new index.html"}},
		{"a bundle anyone may enter", 7, func(t *testing.T, b string) { os.Chmod(b, 0o755) }, []string{"the bundle is private (mode 0700)"}},
		{"the whiteout not applied", 7, func(t *testing.T, b string) {
			os.WriteFile(filepath.Join(b, "rootfs/etc/motd"), nil, 0o644)
		}, []string{"the whiteout removed /etc/motd"}},
		{"the opaque whiteout not applied", 7, func(t *testing.T, b string) {
			os.WriteFile(filepath.Join(b, "rootfs/srv/www/old.html"), nil, 0o644)
		}, []string{"the opaque whiteout emptied /srv/www but for the new index.html"}},
		{"no config.json", 8, func(t *testing.T, b string) { os.Remove(filepath.Join(b, "config.json")) }, []string{"*"}},
		{"config.json is not JSON", 8, func(t *testing.T, b string) {
			os.WriteFile(filepath.Join(b, "config.json"), []byte("{"), 0o644)
		}, []string{"*"}},
		{"another pids limit", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			*s.Linux.Resources.Pids.Limit = 100
			writeSpec(t, b, s)
		}, []string{"the spec asks for the limits (64Mi memory, 64 pids, half a CPU)"}},
		{"no memory limit", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			s.Linux.Resources.Memory = nil
			writeSpec(t, b, s)
		}, []string{"the spec asks for the limits (64Mi memory, 64 pids, half a CPU)"}},
		{"inheritable capabilities", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			s.Process.Capabilities.Inheritable = []string{"CAP_CHOWN"}
			writeSpec(t, b, s)
		}, []string{"no inheritable capabilities, and noNewPrivileges"}},
		{"new privileges allowed", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			s.Process.NoNewPrivileges = false
			writeSpec(t, b, s)
		}, []string{"no inheritable capabilities, and noNewPrivileges"}},
		{"another cgroup", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			s.Linux.CgroupsPath = "/elsewhere"
			writeSpec(t, b, s)
		}, []string{"cgroupsPath is <state cgroup root>/hello"}},
		{"the cgroup every state directory once shared", 8, func(t *testing.T, b string) {
			s := readSpec(t, b)
			s.Linux.CgroupsPath = "/podlab/hello"
			writeSpec(t, b, s)
		}, []string{"cgroupsPath is <state cgroup root>/hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			tt.breaks(t, helloBundle(t, state))
			want := map[string]bool{"*": true}
			for _, name := range tt.fails {
				want[name] = false
			}
			wantResults(t, results(t, tt.n, lesson.Env{StateDir: state}), want)
		})
	}
}

// testImage is a small image for this host's platform.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestCheck_RegistryAndPull: lesson 01's registry check and lesson 06's
// checks, with a real registry in-process and a real pull.
func TestCheck_RegistryAndPull(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(repo string) {
		t.Helper()
		ref, err := name.ParseReference(host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, testImage(t)); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	env := lesson.Env{StateDir: state, Registry: host}
	const serves = "the registry serves the demo images"

	push("podlab/hello:1.0")
	got := results(t, 1, env)
	wantResults(t, got, map[string]bool{serves: false})
	if h := got[serves].Hint; !strings.Contains(h, "library/nginx") {
		t.Errorf("hint %q does not name the missing image", h)
	}
	push("library/nginx:latest")
	wantResults(t, results(t, 1, env), map[string]bool{serves: true})

	s, err := pull.OpenStore(pull.StoreDir(state))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pull.Pull(ctx, s, host+"/podlab/hello:1.0", pull.Options{}); err != nil {
		t.Fatal(err)
	}
	wantResults(t, results(t, 6, env), map[string]bool{
		"nginx is in the content store":            false,
		"podlab/hello:1.0 is in the content store": true,
		"every blob's sha256 is its name":          true,
	})
	if _, err := pull.Pull(ctx, s, "nginx", pull.Options{Mirror: srv.URL}); err != nil {
		t.Fatal(err)
	}
	wantResults(t, results(t, 6, env), map[string]bool{"*": true})

	// A changed blob is caught.
	blobs, _ := filepath.Glob(filepath.Join(s.Dir(), "blobs", "sha256", "*"))
	if len(blobs) == 0 {
		t.Fatal("no blobs")
	}
	if err := os.WriteFile(blobs[0], []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantResults(t, results(t, 6, env), map[string]bool{"every blob's sha256 is its name": false})
}

// TestCheck_Cleanup: lesson 13's checks pass on an empty state directory
// (and one that is gone, or keeps the demo images), and fail on what a
// cluster leaves.
func TestCheck_Cleanup(t *testing.T) {
	const (
		empty  = "the state directory is empty (but for the demo images)"
		inRunc = "no container is left in runc"
	)
	tests := []struct {
		name  string
		make  []string // directories to make under the state dir
		fails []string
	}{
		{"empty", nil, nil},
		{"the demo images kept", []string{"demo-images/blobs", "cache/debs"}, nil},
		{"a store left", []string{"etcd"}, []string{empty}},
		{"a container left in runc", []string{"runc/hello"}, []string{inRunc, empty}},
		{"a container left on a node", []string{"nodes/node-1/runc/k8s_web_web_default_u_0"}, []string{inRunc, empty}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			for _, d := range tt.make {
				if err := os.MkdirAll(filepath.Join(state, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]bool{"*": true}
			for _, name := range tt.fails {
				want[name] = false
			}
			wantResults(t, results(t, 13, lesson.Env{StateDir: state}), want)
		})
	}
	wantResults(t, results(t, 13, lesson.Env{StateDir: filepath.Join(t.TempDir(), "gone")}), map[string]bool{"*": true})
}
