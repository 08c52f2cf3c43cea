package up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

func TestChain_Numbering(t *testing.T) {
	if len(PodChain) != 16 || len(DeploymentChain) != 18 {
		t.Fatalf("the chain's description has 16 and 18 steps, got %d and %d", len(PodChain), len(DeploymentChain))
	}
	tests := []struct {
		name       string
		deployment bool
		podN, want int
	}{
		{"pod step 1 is step 1", false, 1, 1},
		{"pod step 16 is step 16", false, 16, 16},
		{"deployment: the user's steps keep their numbers", true, 3, 3},
		{"deployment: the scheduler's cycle is step 6", true, 4, 6},
		{"deployment: the kubelet creates the pod at step 9", true, 7, 9},
		{"deployment: the last step is 18", true, 16, 18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podStep(tt.deployment, tt.podN); got != tt.want {
				t.Errorf("podStep(%v, %d) = %d, want %d", tt.deployment, tt.podN, got, tt.want)
			}
			// The pod's steps from 4 on are the Deployment's, word for word,
			// but for 7 ("starts creating the pod" / "creates a pod").
			chain := Chain(tt.deployment)
			if tt.podN >= 4 && tt.podN != 7 && PodChain[tt.podN-1] != chain[tt.want-1] {
				t.Errorf("pod step %d (%q) is not the chain's step %d (%q)", tt.podN, PodChain[tt.podN-1], tt.want, chain[tt.want-1])
			}
		})
	}
	if !strings.Contains(DeploymentChain[8], "kubelet creates a pod") {
		t.Errorf("deployment step 9 is %q", DeploymentChain[8])
	}
}

func TestCapNames(t *testing.T) {
	tests := []struct {
		name string
		set  uint64
		want []string
	}{
		{"none", 0, nil},
		{"chown", 1, []string{"CAP_CHOWN"}},
		{"net_bind_service and sys_admin", 1<<10 | 1<<21, []string{"CAP_NET_BIND_SERVICE", "CAP_SYS_ADMIN"}},
		{"containerd's default set", 0x00000000a80425fb, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
			"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP"}},
		{"an unknown bit", 1 << 50, []string{"cap_50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CapNames(tt.set); !slices.Equal(got, tt.want) {
				t.Errorf("CapNames(%#x) = %v, want %v", tt.set, got, tt.want)
			}
		})
	}
}

func TestCgroupOf(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"v2", "0::/podlab/kubepods/pod1/c1\n", "/podlab/kubepods/pod1/c1"},
		{"hybrid: the unified path", "12:memory:/podlab/a\n0::/podlab/a\n", "/podlab/a"},
		{"v1 only: memory's", "4:cpu,cpuacct:/x\n9:memory:/podlab/b\n", "/podlab/b"},
		{"hybrid with an empty unified path", "9:memory:/podlab/c\n0::/\n", "/podlab/c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cgroupOf(tt.text); got != tt.want {
				t.Errorf("cgroupOf(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestLeaves(t *testing.T) {
	got := leaves(map[string]bool{"/podlab": true, "/podlab/kubepods": true, "/podlab/kubepods/pod1/c1": true,
		"/podlab/kubepods/pod1": true, "/podlab/kubepods/pod2": true, "/podlab/x": true})
	want := []string{"/podlab/kubepods/pod1/c1", "/podlab/kubepods/pod2", "/podlab/x"}
	if !slices.Equal(got, want) {
		t.Errorf("leaves = %v, want %v", got, want)
	}
}

func TestChange(t *testing.T) {
	created := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	bound := created.DeepCopy()
	bound.Spec.NodeName = "node-1"
	bound.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	running := bound.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ContainerID: "podlab://k8s_web",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(0, 0)}}}}
	tests := []struct {
		name      string
		prev, cur *corev1.Pod
		want      []string
	}{
		{"the first revision", nil, created, []string{"created: Pending, no node"}},
		{"the binding", created, bound, []string{"spec.nodeName=node-1", "PodScheduled=True"}},
		{"the start", bound, running, []string{"phase Pending -> Running", "container web running since 1970-01-01T00:00:00Z", "containerID podlab://k8s_web"}},
		{"nothing visible", running, running, []string{"(metadata or timestamps)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := change(tt.prev, tt.cur)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("change = %q, want it to say %q", got, w)
				}
			}
		})
	}
}

func TestCheckStateDir(t *testing.T) {
	podlab := t.TempDir()
	os.Mkdir(filepath.Join(podlab, "etcd"), 0o700)
	nodesOnly := t.TempDir()
	os.Mkdir(filepath.Join(nodesOnly, "nodes"), 0o700)
	if err := CheckStateDir(podlab); err != nil {
		t.Errorf("a state dir with etcd/: %v", err)
	}
	if err := CheckStateDir(nodesOnly); err != nil {
		t.Errorf("a state dir with nodes/: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	fileMarker := t.TempDir()
	os.WriteFile(filepath.Join(fileMarker, "etcd"), nil, 0o600)
	bad := []struct{ name, dir, want string }{
		{"the root", "/", "not a podlab state directory: /"},
		{"an empty directory", t.TempDir(), "has no etcd/, nodes/, content/, containerd/ inside"},
		{"a missing directory", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"a file", file, "is not a directory"},
		{"a marker that is a file", fileMarker, "has no etcd/"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckStateDir(tt.dir)
			if !errors.Is(err, ErrNotStateDir) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckStateDir(%s) = %v, want ErrNotStateDir saying %q", tt.dir, err, tt.want)
			}
		})
	}
}

// TestReset_Files: what podlab makes goes, the demo images and the .deb
// cache stay (unless All), what it does not make is left alone, and a
// namespace-like bind mount is unmounted before its directory goes.
func TestReset_Files(t *testing.T) {
	testenv.RequireRoot(t)
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"etcd", "auth", "content/blobs", "registry/sha256", "bundles/hello/rootfs",
				"nodes/node-1/netns", "nodes/node-1/content", "demo-images/blobs", "cache/debs", "mine"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(dir, "etcd", "store.db"), []byte("x"), 0o600)
			// A bind mount under nodes/, as a pod's pinned namespace is.
			target := filepath.Join(dir, "nodes/node-1/netns/uid1")
			os.WriteFile(target, nil, 0o444)
			if err := unix.Mount("/proc/self/ns/net", target, "", unix.MS_BIND, ""); err != nil {
				t.Fatalf("bind-mounting a netns: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })

			// The state directory's own cgroup root (the directory is the
			// test's temporary one): empty cgroups under it go, and it too.
			cgRoot := statedir.Layout{Dir: dir}.CgroupRoot()
			made := makeCgroups(t, cgRoot+"/nodes/node-1/kubepods/pod1/c1")
			res, err := Reset(context.Background(), ResetOptions{StateDir: dir, All: all, Runtime: "/bin/true"})
			if err != nil {
				t.Fatalf("Reset: %v", err)
			}
			if !slices.Contains(res.Unmounted, target) {
				t.Errorf("Unmounted = %v, want %s", res.Unmounted, target)
			}
			for _, d := range made {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("cgroup %s is still there", d)
				}
				if !slices.Contains(res.Cgroups, d) {
					t.Errorf("Cgroups does not list %s: %v", d, res.Cgroups)
				}
			}
			if m, _ := mountsUnder(dir); len(m) > 0 {
				t.Errorf("mounts left under %s: %v", dir, m)
			}
			for _, gone := range []string{"etcd", "auth", "content", "registry", "bundles", "nodes"} {
				if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
					t.Errorf("%s is still there", gone)
				}
			}
			for _, kept := range []string{"demo-images", "cache"} {
				_, err := os.Stat(filepath.Join(dir, kept))
				if all && err == nil {
					t.Errorf("%s is still there after --all", kept)
				}
				if !all && err != nil {
					t.Errorf("%s was removed without --all", kept)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "mine")); err != nil {
				t.Errorf("mine/, not podlab's, was removed")
			}
			if !slices.ContainsFunc(res.Kept, func(s string) bool { return strings.Contains(s, "mine (not podlab's") }) {
				t.Errorf("Kept does not say mine/ was left alone: %v", res.Kept)
			}
			// Run again: nothing of podlab's left, the check refuses.
			if _, err := Reset(context.Background(), ResetOptions{StateDir: dir, Runtime: "/bin/true"}); !errors.Is(err, ErrNotStateDir) {
				t.Errorf("a second Reset: %v, want ErrNotStateDir", err)
			}
		})
	}
}

// TestGetInPod_NetworkNamespace: a GET from inside a fresh network
// namespace reaches what listens on that namespace's loopback, and not the
// node's.
func TestGetInPod_NetworkNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	ns := filepath.Join(t.TempDir(), "netns")
	os.WriteFile(ns, nil, 0o444)
	lnc := make(chan net.Listener, 1)
	errc := make(chan error, 1)
	go func() {
		unixLock() // the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		if err := testenv.LoopbackUp(); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), ns, "", unix.MS_BIND, ""); err != nil {
			errc <- err
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			errc <- err
			return
		}
		lnc <- ln
	}()
	var ln net.Listener
	select {
	case err := <-errc:
		t.Fatalf("making a network namespace: %v", err)
	case ln = <-lnc:
	}
	t.Cleanup(func() { unix.Unmount(ns, unix.MNT_DETACH) })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "inside")
		fmt.Fprintln(w, "hello from the pod's loopback")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	ans, err := GetInPod(context.Background(), ns, port, "/", 2*time.Second)
	if err != nil {
		t.Fatalf("GetInPod: %v", err)
	}
	if ans.StatusLine != "HTTP/1.1 200 OK" || ans.Header.Get("Server") != "inside" || !strings.Contains(string(ans.Body), "pod's loopback") {
		t.Errorf("answer: %q %v %q", ans.StatusLine, ans.Header, ans.Body)
	}
	if ans.URL != "http://127.0.0.1:"+strconv.Itoa(port)+"/" {
		t.Errorf("URL %q", ans.URL)
	}
	// Bad inputs fail with what was being done.
	bad := []struct {
		name, netns string
		port        int
		want        string
	}{
		{"no such namespace file", filepath.Join(t.TempDir(), "nope"), port, "opening the network namespace"},
		{"not a namespace", ln0File(t), port, "setns"},
		{"nothing listens", ns, freePortIn(t, ns), "connection refused"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GetInPod(context.Background(), tt.netns, tt.port, "/", 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("GetInPod: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// makeCgroups makes the cgroup path in the unified hierarchy and in the
// memory controller's, and returns every directory made.
func makeCgroups(t *testing.T, path string) []string {
	t.Helper()
	var made []string
	for _, top := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if unix.Statfs(top, &st) != nil || (st.Type != unix.CGROUP2_SUPER_MAGIC && st.Type != unix.CGROUP_SUPER_MAGIC) {
			continue
		}
		d := top
		for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
			d = filepath.Join(d, part)
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				t.Fatalf("making cgroup %s: %v", d, err)
			}
			made = append(made, d)
		}
		t.Cleanup(func() {
			for i := len(made) - 1; i >= 0; i-- {
				unix.Rmdir(made[i])
			}
		})
	}
	if len(made) == 0 {
		testenv.Missing(t, "no cgroup hierarchy mounted")
	}
	return made
}

// ln0File is a regular file: setns on it fails.
func ln0File(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(p, []byte("x"), 0o644)
	return p
}

// freePortIn is a port nothing listens on in the namespace ns.
func freePortIn(t *testing.T, ns string) int {
	c, err := DialInNetns(context.Background(), ns, "tcp", "127.0.0.1:1")
	if err == nil {
		c.Close()
		t.Fatalf("something listens on port 1 in the pod's fresh network namespace %s", ns)
	}
	return 1
}

// TestReadProcess_Self: podlab's own process is in the node's namespaces,
// each one Host, none pinned.
func TestReadProcess_Self(t *testing.T) {
	p, err := ReadProcess(os.Getpid(), "/", map[string]string{"net": "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Namespaces) < 5 {
		t.Errorf("only %d namespaces read: %+v", len(p.Namespaces), p.Namespaces)
	}
	for _, ns := range p.Namespaces {
		if !ns.Host || ns.Pinned != "" || !strings.HasPrefix(ns.ID, ns.Kind+":[") {
			t.Errorf("namespace %+v: want the host's, not pinned", ns)
		}
	}
	if !p.RootIs {
		t.Errorf("the test's root is not / ?")
	}
	if p.UID == "" || p.Command == "" {
		t.Errorf("process: %+v", p)
	}
	if _, err := ReadProcess(1<<30, "/", nil); err == nil {
		t.Errorf("ReadProcess of a missing pid: no error")
	}
}

// unixLock locks the goroutine to its thread for good: the thread, in
// another namespace, ends with the goroutine.
func unixLock() { runtime.LockOSThread() }

// TestReset_SubPathMounts: a pod's subPath bind mount of a volume, stacked
// twice on its path, is unmounted, and the volume's files are not removed
// through it.
func TestReset_SubPathMounts(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	volume := t.TempDir() // stands for a hostPath volume, or the host's /
	keep := filepath.Join(volume, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "nodes/node-1/pods/uid1/volume-subpaths/v/c/0")
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := unix.Mount(volume, target, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mounting %s: %v", volume, err)
		}
	}
	t.Cleanup(func() {
		for range 3 {
			unix.Unmount(target, unix.MNT_DETACH)
		}
	})
	res, err := Reset(context.Background(), ResetOptions{StateDir: dir, Runtime: "/bin/true"})
	if err != nil {
		t.Errorf("Reset: %v", err)
	}
	if !slices.Contains(res.Unmounted, target) {
		t.Errorf("Unmounted = %v, want %s", res.Unmounted, target)
	}
	if m, _ := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", dir, m)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Errorf("reset removed the mounted volume's file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); err == nil {
		t.Errorf("nodes/ is still there")
	}
}

// TestReset_FreesUsernsClaims: reset frees the machine-wide claims on the
// user namespace ranges of its state directory's pods, and no other state
// directory's.
func TestReset_FreesUsernsClaims(t *testing.T) {
	claims := statedir.UsernsClaims{Dir: t.TempDir()}
	if err := os.WriteFile(claims.Lock(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mine, other := statedir.Layout{Dir: t.TempDir()}, statedir.Layout{Dir: t.TempDir()}
	for i, l := range []statedir.Layout{mine, other} {
		base := uint32(65536 * (i + 1))
		rec := l.Node("node-1").UsernsRecord("pod-a")
		m := fmt.Sprintf(`{"hostId":%d,"containerId":0,"length":65536}`, base)
		if err := os.MkdirAll(filepath.Dir(rec), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rec, []byte(`{"uidMappings":[`+m+`],"gidMappings":[`+m+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		claim := fmt.Sprintf(`{"stateDir":%q,"node":"node-1","podUID":"pod-a"}`, l.Dir)
		if err := os.WriteFile(claims.Claim(base), []byte(claim), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Reset(context.Background(), ResetOptions{StateDir: mine.Dir, Runtime: "/bin/true", UsernsClaims: claims})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if _, err := os.Stat(claims.Claim(65536)); !os.IsNotExist(err) {
		t.Errorf("the reset state directory's claim %s is still there: %v", claims.Claim(65536), err)
	}
	if !slices.Contains(res.Removed, claims.Claim(65536)) {
		t.Errorf("Removed does not list the claim: %v", res.Removed)
	}
	if _, err := os.Stat(claims.Claim(131072)); err != nil {
		t.Errorf("another state directory's claim was removed: %v", err)
	}
}

// mountsUnder finds the mounts below a directory, deepest first, with
// mountinfo's escapes undone (a space is \040 there).
func TestMountsUnder(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	outer := filepath.Join(dir, "with space")
	inner := filepath.Join(outer, "inner")
	for _, p := range []string{outer, inner} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(p, unix.MNT_DETACH) })
		if p == outer {
			if err := os.MkdirAll(inner, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{inner, outer}; !slices.Equal(got, want) {
		t.Errorf("mountsUnder(%s) = %q, want %q (deepest first, unescaped)", dir, got, want)
	}
	if got, _ := mountsUnder(inner); len(got) != 0 {
		t.Errorf("mountsUnder(%s) = %q: a mount on the directory itself is not below it", inner, got)
	}
}
