package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/unpack"
)

// usernsPod is a hello pod with hostUsers: false, runAsUser: 0 (what
// PodSecurity restricted admits for such a pod) and an emptyDir at /data.
func usernsPod(t *testing.T, name string) *corev1.Pod {
	p := helloPod(t, name)
	no, root := false, int64(0)
	p.Spec.HostUsers = &no
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &root}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// openStateDir lets other users search the state directory and its
// parents (t.TempDir makes them 0700), as /var/lib/podlab is: a pod's root
// in its user namespace must reach its rootfs.
func openStateDir(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// containerPid is the host pid of the pod's container web, as the
// runtime's verbose ContainerStatus says.
func (c *cluster) containerPid(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	return c.inspectContainer(t, c.get(t, pod.Name), "web").Info.Pid
}

// inUserns runs a shell command of the host in the user namespace of pid,
// as its root (nsenter --user sets uid and gid 0 there).
func inUserns(t *testing.T, pid int, script string) string {
	t.Helper()
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--user", "--", "/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter --user %s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// uidMapInside is /proc/self/uid_map as a process in pid's user namespace
// reads it (the host's own, read from the host, when pid shares it).
func uidMapInside(t *testing.T, pid int) string {
	t.Helper()
	if mustReadlink(t, fmt.Sprintf("/proc/%d/ns/user", pid)) == mustReadlink(t, "/proc/self/ns/user") {
		b, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return inUserns(t, pid, "cat /proc/self/uid_map")
}

// hostUID is the real uid of pid as the host sees it (/proc/PID/status).
func hostUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return ""
}

func mustReadlink(t *testing.T, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func owner(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid
}

// TestUserNamespace_HostUsersFalse: a pod with hostUsers: false and
// runAsUser: 0 runs as root only inside its own user namespace: uid_map
// "0 BASE 65536", its process host uid BASE, its emptyDir writes owned by
// BASE, its rootfs shifted, /etc/hosts idmapped. Two pods get disjoint
// ranges; a removed pod's range is free again; a pod without hostUsers is
// unchanged (uid_map "0 0 4294967295").
func TestUserNamespace_HostUsersFalse(t *testing.T) {
	c := newCluster(t)
	openStateDir(t, c.dir)
	ctx := context.Background()
	layout := c.kubelet.Layout()

	first := c.create(t, usernsPod(t, "inside"))
	c.syncUntil(t, "inside", 15*time.Second, "Running", running)
	pid := c.containerPid(t, first)

	uidMap := strings.Fields(uidMapInside(t, pid))
	if len(uidMap) != 3 || uidMap[0] != "0" || uidMap[2] != "65536" {
		t.Fatalf("uid_map inside = %q, want \"0 BASE 65536\"", uidMap)
	}
	base, err := strconv.ParseUint(uidMap[1], 10, 32)
	if err != nil || base < 65536 || base%65536 != 0 {
		t.Fatalf("uid_map base %q: want a multiple of 65536 from 65536 up", uidMap[1])
	}
	if gidMap := strings.Fields(inUserns(t, pid, "cat /proc/self/gid_map")); strings.Join(gidMap, " ") != strings.Join(uidMap, " ") {
		t.Errorf("gid_map %q, want %q", gidMap, uidMap)
	}
	if u := hostUID(t, pid); u != uidMap[1] {
		t.Errorf("the container's process is host uid %s, want %d (runAsUser 0 is root inside only)", u, base)
	}

	// What the pod's root writes to its emptyDir is the range's on the host.
	inUserns(t, pid, fmt.Sprintf("id -u > /proc/%d/root/data/written", pid))
	written := filepath.Join(layout.EmptyDir(first.UID, "data"), "written")
	if got := owner(t, written); uint64(got) != base {
		t.Errorf("%s is owned by host uid %d, want %d", written, got, base)
	}
	// The rootfs is the node's shared snapshots, idmapped into the range
	// (nothing chowned), under an upper directory of the pod's root; the
	// kubelet's /etc/hosts (host root's) is idmapped to the pod's root.
	bundle := c.inspectContainer(t, c.get(t, "inside"), "web").Info.Bundle
	if bs, err := unpack.ReadBundleSnapshot(bundle); err != nil || bs == nil || !bs.IDMapped {
		t.Errorf("the rootfs is not an idmapped overlay of the node's snapshots: %+v, %v", bs, err)
	}
	rootfs := filepath.Join(bundle, "rootfs")
	if got := owner(t, rootfs); uint64(got) != base {
		t.Errorf("rootfs owned by %d, want %d", got, base)
	}
	if got := owner(t, fmt.Sprintf("/proc/%d/root/etc/hosts", pid)); uint64(got) != base {
		t.Errorf("/etc/hosts in the container is owned by host uid %d, want %d (idmapped)", got, base)
	}
	sb := c.sandboxOf(t, first.UID)
	if got := owner(t, filepath.Join(sb.Info.PodDir, "hosts")); got != 0 {
		t.Errorf("the runtime's hosts file is owned by %d on disk, want 0", got)
	}
	userns := sb.Info.Namespaces["user"]
	if userns == "" {
		t.Errorf("the sandbox pins no user namespace: %v", sb.Info.Namespaces)
	}
	if _, err := os.Stat(layout.UserNamespaceFile(first.UID)); err != nil {
		t.Errorf("no record of the range: %v", err)
	}

	// A second pod: a range of its own.
	second := c.create(t, usernsPod(t, "beside"))
	c.syncUntil(t, "beside", 15*time.Second, "Running", running)
	base2, _ := strconv.ParseUint(strings.Fields(uidMapInside(t, c.containerPid(t, second)))[1], 10, 32)
	if base2 == base || (base2 < base+65536 && base < base2+65536) {
		t.Errorf("ranges overlap: %d and %d", base, base2)
	}

	// Removed: the record and the pinned user namespace go; the range is free.
	if _, err := c.admin.Delete(ctx, "pods", "default", "inside", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.kubelet.SyncPod(ctx, c.get(t, "inside")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.Get(ctx, "pods", "default", "inside"); !apierrors.IsNotFound(err) {
		t.Fatalf("pod inside is still there: %v", err)
	}
	for _, p := range []string{layout.UserNamespaceFile(first.UID), userns} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the pod was removed: %v", p, err)
		}
	}
	third := c.create(t, usernsPod(t, "after"))
	c.syncUntil(t, "after", 15*time.Second, "Running", running)
	if got := hostUID(t, c.containerPid(t, third)); got != uidMap[1] {
		t.Errorf("a new pod got host uid %s, want the freed range's %d", got, base)
	}

	// hostUsers unset: the host's user namespace, as before.
	c.create(t, helloPod(t, "host"))
	c.syncUntil(t, "host", 15*time.Second, "Running", running)
	hostPid := c.containerPid(t, c.get(t, "host"))
	if m := strings.Join(strings.Fields(uidMapInside(t, hostPid)), " "); m != "0 0 4294967295" {
		t.Errorf("a pod without hostUsers: uid_map %q, want the host's \"0 0 4294967295\"", m)
	}
	if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", hostPid)); ns != mustReadlink(t, "/proc/self/ns/user") {
		t.Errorf("a pod without hostUsers is in user namespace %s, not the host's", ns)
	}
	if _, err := os.Stat(layout.UserNamespaceFile(c.get(t, "host").UID)); !os.IsNotExist(err) {
		t.Errorf("a pod without hostUsers got a range: %v", err)
	}
}

// TestUserNamespace_RuncTooOld: a runc that cannot idmap mounts fails the
// sandbox with an event naming it; nothing is pinned, no range is taken,
// nothing runs.
func TestUserNamespace_RuncTooOld(t *testing.T) {
	old := filepath.Join(t.TempDir(), "runc")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho 'runc version 1.1.5'\necho 'spec: 1.0.2-dev'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newClusterWithRuntime(t, func(rc *cri.Config) { rc.Runtime = old })
	pod := c.create(t, usernsPod(t, "old"))
	_, err := c.kubelet.SandboxStage(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "user namespaces are not supported here: runc 1.1.5") {
		t.Fatalf("error %v: want the runtime's refusal naming runc 1.1.5", err)
	}
	if ev := c.events(t, pod); !hasEvent(ev, "Warning FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: code = ") ||
		!strings.Contains(strings.Join(ev, "\n"), "runc 1.1.5") {
		t.Errorf("events %q: want FailedCreatePodSandBox with the runtime's error naming runc 1.1.5", ev)
	}
	if _, err := os.Lstat(c.kubelet.Layout().UserNamespaceFile(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("the range is recorded after a refused sandbox: %v", err)
	}
	if sbs := c.sandboxesOf(t, pod.UID); len(sbs) != 0 {
		t.Errorf("the runtime has %d sandboxes of the refused pod", len(sbs))
	}
	if p := c.get(t, "old"); p.Status.Phase == corev1.PodRunning {
		t.Errorf("the pod runs: %s", statusText(p))
	}
}

// TestUserNamespace_WithHostNamespaces: hostUsers: false with a host
// namespace cannot be the pod's user namespace's: the kubelet refuses it
// (whatever the API server let through), and takes no range.
func TestUserNamespace_WithHostNamespaces(t *testing.T) {
	c := newCluster(t)
	tests := []struct {
		name string
		uid  types.UID
		set  func(*corev1.PodSpec)
	}{
		{"hostNetwork", "00000000-0000-0000-0000-000000000001", func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{"hostIPC", "00000000-0000-0000-0000-000000000002", func(s *corev1.PodSpec) { s.HostIPC = true }},
		{"hostPID", "00000000-0000-0000-0000-000000000003", func(s *corev1.PodSpec) { s.HostPID = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := usernsPod(t, strings.ToLower(tt.name))
			pod.UID = tt.uid
			pod.Spec.NodeName = apiserver.HostNode
			tt.set(&pod.Spec)
			_, err := c.kubelet.SandboxStage(context.Background(), pod)
			wantErr(t, err, kubelet.ErrUnsupported)
			if _, err := os.Lstat(c.kubelet.Layout().UserNamespaceFile(pod.UID)); !os.IsNotExist(err) {
				t.Errorf("a range was recorded for a refused pod: %v", err)
			}
		})
	}
}
