package lesson_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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

	"github.com/podlab/podlab/lessons"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/lesson"
	"github.com/podlab/podlab/steps/pki"
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

// TestHasChecks: every lesson has checks (lessons 14 to 19 had none), and
// a number no lesson has has none.
func TestHasChecks(t *testing.T) {
	all, err := lesson.ListFS(lessons.Files)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		if !lesson.HasChecks(l.Number) {
			t.Errorf("lesson %02d (%s) has no checks", l.Number, l.File)
		}
	}
	for _, n := range []int{0, len(all) + 1, 42, -1} {
		if lesson.HasChecks(n) {
			t.Errorf("lesson %d has checks", n)
		}
		if r := lesson.Check(context.Background(), n, lesson.Env{StateDir: t.TempDir()}); r != nil {
			t.Errorf("Check(%d) = %v, want nil", n, r)
		}
	}
}

// holdsOnFreshState lists the checks that pass on a state directory where
// only `podlab init` was done, and why: init is lesson 02's first step, and
// a refused request leaves nothing to see (kube-apiserver's audit log would
// show it; podlab has none).
var holdsOnFreshState = map[int][]string{
	2: {"the control plane is initialized (token file and store)", "the cluster CA signed the admin's client certificate and kubeconfig", "the refused requests stored nothing"},
}

// initLab does what `podlab init` does: the control plane, then the PKI.
func initLab(t *testing.T, state string) {
	t.Helper()
	if _, err := apiserver.Init(context.Background(), state); err != nil {
		t.Fatal(err)
	}
	o := pki.Options{Layout: statedir.Layout{Dir: state}, Nodes: []pki.Node{{Name: apiserver.HostNode}}}
	if _, err := pki.Ensure(o); err != nil {
		t.Fatal(err)
	}
}

// TestCheck_FreshState: on a state directory where nothing was done, or
// only `podlab init`, every check of lessons 02 to 12 fails (but for
// holdsOnFreshState after init) with a hint that names a command; lesson
// 13's pass on an empty directory, which is what a reset leaves, and the
// directory is not empty after init. Checking writes nothing.
func TestCheck_FreshState(t *testing.T) {
	command := regexp.MustCompile("`[^`]+`")
	tests := []struct {
		name string
		init bool
	}{
		{"empty", false},
		{"after podlab init", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			if tt.init {
				initLab(t, state)
			}
			before := listTree(t, state)
			env := lesson.Env{StateDir: state, Registry: deadRegistry(t), Runtime: "/nonexistent/runc"}
			wantResults(t, results(t, 1, env), map[string]bool{"the registry serves the demo images": false})
			for n := 2; n <= 19; n++ {
				if n == 13 { // cleanup: below
					continue
				}
				got := results(t, n, env)
				if len(got) != len(lesson.CheckNames(n)) {
					t.Errorf("lesson %d: %d results for checks %q", n, len(got), lesson.CheckNames(n))
				}
				for name, r := range got {
					if tt.init && slices.Contains(holdsOnFreshState[n], name) {
						continue
					}
					if r.OK {
						t.Errorf("lesson %d: %q passed on a state directory where the lesson was not done", n, name)
					} else if !command.MatchString(r.Hint) {
						t.Errorf("lesson %d: %q failed with a hint that names no command in `backquotes`: %s", n, name, r.Hint)
					}
				}
			}
			if tt.init {
				wantResults(t, results(t, 13, env), map[string]bool{"*": true, "the state directory is empty (but for the demo images)": false})
			} else {
				wantResults(t, results(t, 13, env), map[string]bool{"*": true})
			}
			if after := listTree(t, state); !slices.Equal(before, after) {
				t.Errorf("checking wrote into the state directory: %q, then %q", before, after)
			}
		})
	}
}

// listTree lists the paths under dir and their sizes.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out = append(out, path)
		} else {
			out = append(out, fmt.Sprintf("%s %d", path, fi.Size()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheck_APIServer walks lessons 02 and 03 through the real API server.
func TestCheck_APIServer(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	env := lesson.Env{StateDir: state}
	initLab(t, state)
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

	// Lesson 03: db comes and goes; then the history before db is
	// compacted, which keeps db's life in it.
	const dbDeleted = "pod db was created, then deleted (the store's history)"
	wantResults(t, results(t, 3, env), map[string]bool{"pod web reads back through the gate": true, dbDeleted: false})
	beforeDB := storeRevision(t, state)
	do(func(c apiserver.Interface) error {
		_, err := c.Create(ctx, pod("db"))
		return err
	})
	wantResults(t, results(t, 2, env), map[string]bool{"the refused requests stored nothing": false})
	got := results(t, 3, env)
	wantResults(t, got, map[string]bool{"pod web reads back through the gate": true, dbDeleted: false})
	if h := got[dbDeleted].Hint; !strings.Contains(h, "still there: `podlab delete pod db`") {
		t.Errorf("hint %q does not say db is still there", h)
	}
	do(func(c apiserver.Interface) error {
		_, err := c.Delete(ctx, "pods", "default", "db", apiserver.DeleteOptions{})
		return err
	})
	wantResults(t, results(t, 3, env), map[string]bool{
		"pod web reads back through the gate": true,
		dbDeleted:                             true,
		"the store's history is compacted (a watch from revision 1 is 410 Gone)": false,
	})
	compact(t, state, beforeDB)
	wantResults(t, results(t, 3, env), map[string]bool{"*": true})

	// Compacted past db's deletion, the store no longer shows that db was
	// ever there: the check cannot tell, and says how to redo it.
	compact(t, state, storeRevision(t, state))
	got = results(t, 3, env)
	wantResults(t, got, map[string]bool{dbDeleted: false, "the store's history is compacted (a watch from revision 1 is 410 Gone)": true})
	if h := got[dbDeleted].Hint; !strings.Contains(h, "`podlab run db --image nginx`") {
		t.Errorf("hint %q does not say how to redo it", h)
	}

	// Lesson 04 binds web: lesson 02's "Pending with no node" no longer holds.
	do(func(c apiserver.Interface) error {
		return c.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}})
	})
	got = results(t, 2, env)
	wantResults(t, got, map[string]bool{"pod web is Pending with no node": false})
	if h := got["pod web is Pending with no node"].Hint; !strings.Contains(h, "bound to node-1") {
		t.Errorf("hint %q does not say where web is bound", h)
	}
	wantResults(t, results(t, 4, env), map[string]bool{"a pod is bound to a node": true})
}

// storeRevision is the store's revision in state.
func storeRevision(t *testing.T, state string) int64 {
	t.Helper()
	st, err := store.Open(store.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rev, err := st.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// compact compacts the store of state up to rev, as `podlab store compact`.
func compact(t *testing.T, state string, rev int64) {
	t.Helper()
	st, err := store.Open(store.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Compact(context.Background(), rev)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
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

// withAdmin runs fn with an admin client of state's API server, then
// closes it, as a podlab command does.
func withAdmin(t *testing.T, state string, fn func(ctx context.Context, c apiserver.Interface) error) {
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
	if err := fn(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// TestCheck_PodHistory: lesson 10's checks of crash and ghost pass only
// when the store's history holds the pod, the kubelet's events about it,
// and its deletion.
func TestCheck_PodHistory(t *testing.T) {
	const (
		crash = "pod crash restarted after a back-off (CrashLoopBackOff), then was deleted"
		ghost = "pod ghost's image pull failed (ErrImagePull, then ImagePullBackOff), then it was deleted"
	)
	type event struct{ typ, reason, message string }
	backOff := event{corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container crash in pod crash_default(u)"}
	pullFailed := event{corev1.EventTypeWarning, "Failed", "Error: ErrImagePull"}
	pullBackOff := event{corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff"}
	tests := []struct {
		name    string
		pod     string // "" for none
		events  []event
		deleted bool
		check   string
		ok      bool
		hint    string // in the hint when it fails
	}{
		{"crash never created", "", nil, false, crash, false, "`podlab run crash"},
		{"crash backed off and deleted", "crash", []event{backOff}, true, crash, true, ""},
		{"crash backed off, not deleted", "crash", []event{backOff}, false, crash, false, "still there: `podlab delete pod crash`"},
		{"crash deleted without a back-off", "crash", nil, true, crash, false, "no BackOff event"},
		{"crash's back-off was a pull's", "crash", []event{{corev1.EventTypeNormal, "BackOff", `Back-off pulling image "x"`}}, true, crash, false, "no BackOff event"},
		{"ghost never created", "", nil, false, ghost, false, "`podlab run ghost"},
		{"ghost failed to pull, backed off, deleted", "ghost", []event{pullFailed, pullBackOff}, true, ghost, true, ""},
		{"ghost never backed off", "ghost", []event{pullFailed}, true, ghost, false, `"Error: ImagePullBackOff"`},
		{"ghost not deleted", "ghost", []event{pullFailed, pullBackOff}, false, ghost, false, "still there: `podlab delete pod ghost`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			if _, err := apiserver.Init(context.Background(), state); err != nil {
				t.Fatal(err)
			}
			if tt.pod != "" {
				withAdmin(t, state, func(ctx context.Context, c apiserver.Interface) error {
					o, err := c.Create(ctx, &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: tt.pod, Namespace: "default"},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: tt.pod, Image: "hello"}}},
					})
					if err != nil {
						return err
					}
					rec := apiserver.NewRecorder(c, "kubelet", "node-1")
					for _, e := range tt.events {
						if err := rec.Event(ctx, o, e.typ, e.reason, e.message); err != nil {
							return err
						}
					}
					if tt.deleted {
						_, err = c.Delete(ctx, "pods", "default", tt.pod, apiserver.DeleteOptions{})
					}
					return err
				})
			}
			got := results(t, 10, lesson.Env{StateDir: state})
			wantResults(t, got, map[string]bool{tt.check: tt.ok})
			if h := got[tt.check].Hint; !tt.ok && !strings.Contains(h, tt.hint) {
				t.Errorf("hint %q does not contain %q", h, tt.hint)
			}
		})
	}
}

// TestCheck_PKI: lesson 02's PKI check passes on what init made, and fails
// with what to do when the CA or the admin's certificate is missing, damaged
// or not the CA's.
func TestCheck_PKI(t *testing.T) {
	const name = "the cluster CA signed the admin's client certificate and kubeconfig"
	foreign, err := pki.NewCA("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := foreign.Issue(pki.Spec{CommonName: "admin", Organization: []string{"system:masters"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		spoil func(l statedir.Layout)
		hint  string // "" if it passes
	}{
		{"as init made it", func(statedir.Layout) {}, ""},
		{"no pki", func(l statedir.Layout) { os.RemoveAll(l.PKIDir()) }, "run `podlab init` (lesson 02)"},
		{"a damaged ca.crt", func(l statedir.Layout) { os.WriteFile(l.CACert(), []byte("x"), 0o644) }, "run `podlab init` again"},
		{"another CA's admin.crt", func(l statedir.Layout) { stranger.Write(l.PKICert("admin"), l.PKIKey("admin")) }, "does not verify against"},
		{"no admin.key", func(l statedir.Layout) { os.Remove(l.PKIKey("admin")) }, "run `podlab init` again"},
		{"no admin.kubeconfig", func(l statedir.Layout) { os.Remove(l.Kubeconfig("admin")) }, "run `podlab init` again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			initLab(t, state)
			tt.spoil(statedir.Layout{Dir: state})
			r, ok := results(t, 2, lesson.Env{StateDir: state})[name]
			if !ok {
				t.Fatalf("lesson 02 has no check %q", name)
			}
			if r.OK != (tt.hint == "") || !strings.Contains(r.Hint, tt.hint) {
				t.Errorf("OK=%v, hint %q; want OK=%v and a hint saying %q", r.OK, r.Hint, tt.hint == "", tt.hint)
			}
		})
	}
}
