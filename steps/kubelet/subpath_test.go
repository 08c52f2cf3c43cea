package kubelet_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/subpath"
)

// subPathPod is a pod of two hello containers sharing the emptyDir "shared":
// writer mounts all of it, reader only subPath.
func subPathPod(t *testing.T, name, sub string) *corev1.Pod {
	p := helloPod(t, name)
	p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	w := p.Spec.Containers[0]
	w.Name = "writer"
	w.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	r := p.Spec.Containers[0]
	r.Name = "reader"
	r.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: sub}}
	p.Spec.Containers = []corev1.Container{w, r}
	return p
}

// prepare runs the stages before create for one container.
func (c *cluster) prepare(t *testing.T, pod *corev1.Pod, container string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kubelet.PullStage(ctx, c.get(t, pod.Name), container); err != nil {
		t.Fatalf("pull %s: %v", container, err)
	}
}

// TestSubPath_SymlinkToHostRoot is CVE-2017-1002101: one container of the
// pod makes `ln -s / /shared/evil` in the emptyDir both share; the other
// mounts subPath evil. The kubelet must refuse it (CreateContainerConfigError
// and the kubelet's Failed event), and give the runtime nothing that leads
// to the host's /.
func TestSubPath_SymlinkToHostRoot(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	pod := c.create(t, subPathPod(t, "evil", "evil"))
	if _, err := c.kubelet.SandboxStage(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The writer's create makes the emptyDir; then, as the writer would
	// from inside with `ln -s / /shared/evil`, the symlink.
	c.prepare(t, pod, "writer")
	if _, err := c.kubelet.CreateStage(ctx, c.get(t, "evil"), "writer"); err != nil {
		t.Fatal(err)
	}
	layout := c.kubelet.Layout()
	if err := os.Symlink("/", filepath.Join(layout.EmptyDir(pod.UID, "shared"), "evil")); err != nil {
		t.Fatal(err)
	}

	c.prepare(t, pod, "reader")
	res, err := c.kubelet.CreateStage(ctx, c.get(t, "evil"), "reader")
	if err == nil {
		for _, m := range res.Config.GetMounts() {
			if m.ContainerPath == "/data" {
				var root, src fs.FileInfo
				root, _ = os.Stat("/")
				src, _ = os.Stat(m.HostPath)
				t.Fatalf("the create stage accepted subPath evil; the runtime is given %s, the host's / (%v)", m.HostPath, os.SameFile(root, src))
			}
		}
		t.Fatal("the create stage accepted subPath evil")
	}
	if n := len(c.containersOf(t, pod.UID)); n != 1 {
		t.Errorf("the runtime has %d containers of the pod, want the writer's only", n)
	}
	if !errors.Is(err, subpath.ErrEscape) {
		t.Errorf("error %v, want subpath.ErrEscape", err)
	}
	if se, ok := errors.AsType[*kubelet.SubPathError](err); !ok || se.VolumeMount != "shared" || se.Container != "reader" {
		t.Errorf("error %#v, want a *kubelet.SubPathError for shared in reader", err)
	}

	want := `failed to prepare subPath for volumeMount "shared" of container "reader"`
	p := c.get(t, "evil")
	var w *corev1.ContainerStateWaiting
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "reader" {
			w = cs.State.Waiting
		}
	}
	if w == nil || w.Reason != kubelet.ReasonCreateConfigError || w.Message != want {
		t.Errorf("reader's state: %s; want waiting CreateContainerConfigError %q", statusText(p), want)
	}
	if ev := c.events(t, p); !hasEvent(ev, "Warning Failed: Error: "+want) {
		t.Errorf("no Failed event %q in %q", "Error: "+want, ev)
	}
	target := layout.SubPath(pod.UID, "shared", "reader", 0)
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), target) {
		t.Errorf("%s is mounted", target)
	}

	// The sync loop agrees: the writer runs, the reader keeps waiting.
	p = c.syncUntil(t, "evil", 10*time.Second, "writer running", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "writer" && cs.State.Running != nil {
				return true
			}
		}
		return false
	})
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "reader" && (cs.State.Waiting == nil || cs.State.Waiting.Reason != kubelet.ReasonCreateConfigError) {
			t.Errorf("after a sync, reader: %s", statusText(p))
		}
	}
}

// TestSubPath_InsideVolume: subPaths that stay inside their volume work,
// the container sees the right files, and removing the pod leaves no
// subPath mount and no volume-subpaths directory.
func TestSubPath_InsideVolume(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	vol := t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(vol, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vol, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("conf/app.txt", "app config")
	write("top.txt", "top")
	if err := os.Symlink("conf", filepath.Join(vol, "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../top.txt", filepath.Join(vol, "conf/up.txt")); err != nil {
		t.Fatal(err)
	}
	p := helloPod(t, "inside")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: vol}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []struct {
		vm   corev1.VolumeMount
		read string // a file under the mount path, or the mount itself
		want string
	}{
		{corev1.VolumeMount{Name: "host", MountPath: "/conf", SubPath: "conf"}, "/conf/app.txt", "app config"},
		{corev1.VolumeMount{Name: "host", MountPath: "/app.txt", SubPath: "conf/app.txt", ReadOnly: true}, "/app.txt", "app config"},
		{corev1.VolumeMount{Name: "host", MountPath: "/current", SubPath: "current"}, "/current/app.txt", "app config"},
		{corev1.VolumeMount{Name: "host", MountPath: "/up.txt", SubPath: "conf/up.txt"}, "/up.txt", "top"},
		{corev1.VolumeMount{Name: "scratch", MountPath: "/made", SubPath: "made/here"}, "/made", ""},
	}
	for _, m := range mounts {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, m.vm)
	}
	pod := c.create(t, p)
	c.syncUntil(t, "inside", 10*time.Second, "Running", running)

	root := fmt.Sprintf("/proc/%d/root", c.inspectContainer(t, c.get(t, pod.Name), "web").Info.Pid)
	for _, m := range mounts {
		if m.want == "" {
			fi, err := os.Stat(root + m.read)
			if err != nil || !fi.IsDir() {
				t.Errorf("%s in the container: %v, want a directory", m.read, err)
			}
			continue
		}
		b, err := os.ReadFile(root + m.read)
		if err != nil || string(b) != m.want {
			t.Errorf("%s in the container: %q, %v; want %q", m.read, b, err, m.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(c.kubelet.Layout().EmptyDir(pod.UID, "scratch"), "made/here")); err != nil || !fi.IsDir() {
		t.Errorf("the missing subPath made/here was not made in the emptyDir: %v", err)
	}
	layout := c.kubelet.Layout()
	for i := range mounts {
		vol := mounts[i].vm.Name
		if target := layout.SubPath(pod.UID, vol, "web", i); !isMountPoint(t, target) {
			t.Errorf("%s is not a mount point", target)
		}
	}

	// Delete: the kubelet stops the container and removes the pod; no
	// subPath mount, no volume-subpaths, and the hostPath's files stay.
	if _, err := c.admin.Delete(ctx, "pods", "default", "inside", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.kubelet.SyncPod(ctx, c.get(t, "inside")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), layout.SubPathsDir(pod.UID)) {
		t.Errorf("a subPath mount is left:\n%s", b)
	}
	if _, err := os.Lstat(layout.SubPathsDir(pod.UID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there: %v", layout.SubPathsDir(pod.UID), err)
	}
	for _, f := range []string{"conf/app.txt", "top.txt", "current"} {
		if _, err := os.Lstat(filepath.Join(vol, f)); err != nil {
			t.Errorf("removing the pod removed the hostPath's %s: %v", f, err)
		}
	}
}

// TestSubPath_Refused is the table of subPaths that leave their volume, or
// cannot be in it: each leaves the container waiting in
// CreateContainerConfigError with the kubelet's text, and mounts nothing.
func TestSubPath_Refused(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	vol := t.TempDir()
	for target, link := range map[string]string{"/": "to-root", "../..": "to-above", "chain-2": "chain-1", "../../..": "chain-2"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, subPath, message string
		want                   error
		// apiRefuses: the API server's validation refuses the pod first
		// (an absolute subPath, or one with ".."), so it never reaches a
		// kubelet; TestVolumeMounts_SubPathRefused covers the kubelet's own
		// check of those as defence in depth.
		apiRefuses bool
	}{
		{"a symlink to /", "to-root", "", subpath.ErrEscape, false},
		{"through a symlink to /", "to-root/etc", "", subpath.ErrEscape, false},
		{"a symlink to ../..", "to-above", "", subpath.ErrEscape, false},
		{"a chain of symlinks that leaves", "chain-1", "", subpath.ErrEscape, false},
		{"a path through a file", "file/x", "", unix.ENOTDIR, false},
		{"absolute", "/etc", "", nil, true},
		{"..", "a/../../etc", "", nil, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("refused-%d", i)
			p := helloPod(t, name)
			p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: vol}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/data", SubPath: tt.subPath}}
			obj, err := c.admin.Create(ctx, p)
			if tt.apiRefuses {
				if !apierrors.IsInvalid(err) {
					t.Fatalf("the API server stored a pod with subPath %q (err %v); want 422 Invalid", tt.subPath, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pod := obj.(*corev1.Pod)
			bindNode(t, c, pod)
			if _, err := c.kubelet.SandboxStage(ctx, c.get(t, name)); err != nil {
				t.Fatal(err)
			}
			c.prepare(t, pod, "web")
			_, err = c.kubelet.CreateStage(ctx, c.get(t, name), "web")
			if err == nil {
				t.Fatalf("subPath %q was accepted", tt.subPath)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			msg := tt.message
			if msg == "" {
				msg = `failed to prepare subPath for volumeMount "host" of container "web"`
			}
			got := c.get(t, name)
			cs := got.Status.ContainerStatuses[0]
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != kubelet.ReasonCreateConfigError || cs.State.Waiting.Message != msg {
				t.Errorf("status %s; want waiting CreateContainerConfigError %q", statusText(got), msg)
			}
			if !hasEvent(c.events(t, got), "Warning Failed: Error: "+msg) {
				t.Errorf("no Failed event %q: %q", msg, c.events(t, got))
			}
			if isMountPoint(t, c.kubelet.Layout().SubPath(pod.UID, "host", "web", 0)) {
				t.Errorf("something is mounted for the refused subPath")
			}
		})
	}
}

// bindNode binds pod to node-1, as the scheduler would.
func bindNode(t *testing.T, c *cluster, pod *corev1.Pod) {
	t.Helper()
	if err := c.admin.Bind(context.Background(), &corev1.Binding{ObjectMeta: pod.ObjectMeta,
		Target: corev1.ObjectReference{Kind: "Node", Name: apiserver.HostNode}}); err != nil {
		t.Fatal(err)
	}
}

func isMountPoint(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}
