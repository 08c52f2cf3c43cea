package kubelet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// TestKubelet_SyncPod_RunsAndRemoves is the end to end: a pod
// reaches Running with a real container whose log has hello's greeting,
// and deleting it removes every container, bundle, cgroup and namespace
// mount it had.
func TestKubelet_SyncPod_RunsAndRemoves(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	pod := c.create(t, helloPod(t, "web"))
	p := c.syncUntil(t, "web", 10*time.Second, "Running", running)

	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 {
		t.Errorf("container status: %+v", cs)
	}
	// The containerID is <runtime name>://<id>: podlab's runtime answers
	// CRI Version with the name podlab, and the id is the runtime's, as
	// ListContainers reports it.
	ctrs := c.containersOf(t, pod.UID)
	if len(ctrs) != 1 || ctrs[0].Metadata.Name != "web" || ctrs[0].Metadata.Attempt != 0 {
		t.Fatalf("the runtime's containers of the pod: %v", ctrs)
	}
	if want := "podlab://" + ctrs[0].Id; cs.ContainerID != want {
		t.Fatalf("containerID %q, want %q (the runtime's name from CRI Version, the id from ListContainers)", cs.ContainerID, want)
	}
	id := ctrs[0].Id
	if !strings.Contains(cs.ImageID, "/podlab/hello@sha256:") || cs.Image != helloRef(t) {
		t.Errorf("image %q, imageID %q", cs.Image, cs.ImageID)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, cd := range p.Status.Conditions {
		conds[cd.Type] = cd.Status
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		if conds[ct] != corev1.ConditionTrue {
			t.Errorf("condition %s is %q, want True (all: %v)", ct, conds[ct], conds)
		}
	}
	if p.Status.StartTime == nil || p.Status.HostIP == "" {
		t.Errorf("startTime %v, hostIP %q", p.Status.StartTime, p.Status.HostIP)
	}
	ev := c.events(t, p)
	for _, want := range []string{
		`Normal Pulling: Pulling image "` + helloRef(t) + `"`,
		`Normal Pulled: Successfully pulled image "` + helloRef(t) + `" in `,
		"Normal Created: Created container: web",
		"Normal Started: Started container web",
	} {
		if !hasEvent(ev, want) {
			t.Errorf("no event %q in %q", want, ev)
		}
	}

	// The log: hello's greeting, its hostname the pod's name, in its own
	// pid namespace; podlab logs reads it as kubectl logs would.
	var out bytes.Buffer
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "serving") && time.Now().Before(deadline) {
		out.Reset()
		if _, err := kubelet.Logs(ctx, c.dir, p, &out, kubelet.LogsOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"Hello from podlab/hello!", "hostname  web", "pid       1", fmt.Sprintf("uid %d", images.HelloUID)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), " stdout F ") {
		t.Errorf("logs printed the CRI prefix:\n%s", out.String())
	}

	layout := c.kubelet.Layout()
	var cgroups []string
	podCgroup, err := layout.PodCgroupPath(pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*" + podCgroup, "/sys/fs/cgroup" + podCgroup} {
		m, _ := filepath.Glob(pattern)
		cgroups = append(cgroups, m...)
	}
	if len(cgroups) == 0 {
		t.Errorf("no pod cgroup %s", podCgroup)
	}
	// What the runtime made, where it says it is (crictl inspect and
	// inspectp): the bundle and config.json, the namespace pins, runc's
	// state; and the CRI log where the kubelet's config put it.
	in := c.inspect(t, id)
	sb := c.sandboxOf(t, pod.UID)
	if in.Info.SandboxID != sb.Status.Id || in.Info.Bundle != layout.CRIBundle(sb.Status.Id, id) {
		t.Errorf("bundle %s of sandbox %s, want %s", in.Info.Bundle, in.Info.SandboxID, layout.CRIBundle(sb.Status.Id, id))
	}
	wantLog := filepath.Join(layout.PodLogsDir(), "default_web_"+string(pod.UID), "web", "0.log")
	if in.Status.LogPath != wantLog {
		t.Errorf("log path %s, want %s", in.Status.LogPath, wantLog)
	}
	if sp := in.Info.RuntimeSpec; sp == nil || sp.Linux == nil || !strings.Contains(sp.Linux.CgroupsPath, "pod"+string(pod.UID)) {
		t.Errorf("the runtime's spec does not put the container under the pod's cgroup: %+v", sp)
	}
	artifacts := []string{in.Info.Bundle, in.Info.Config, in.Info.RuncState, in.Status.LogPath}
	for _, kind := range []string{"net", "ipc", "uts"} {
		p, ok := sb.Info.Namespaces[kind]
		if !ok {
			t.Errorf("the sandbox pins no %s namespace: %v", kind, sb.Info.Namespaces)
		}
		artifacts = append(artifacts, p)
	}
	for _, a := range artifacts {
		if _, err := os.Stat(a); err != nil {
			t.Errorf("missing %s: %v", a, err)
		}
	}

	// Delete: the API server marks the pod; the kubelet stops it (SIGTERM),
	// removes everything, then deletes the pod for good.
	if _, err := c.admin.Delete(ctx, "pods", "default", "web", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.kubelet.SyncPod(ctx, c.get(t, "web")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.Get(ctx, "pods", "default", "web"); !apierrors.IsNotFound(err) {
		t.Errorf("the pod is still there after its kubelet removed it: %v", err)
	}
	if !hasEvent(c.events(t, p), "Normal Killing: Stopping container web") {
		t.Errorf("no Killing event: %q", c.events(t, p))
	}
	for _, a := range append(artifacts, cgroups...) {
		if _, err := os.Lstat(a); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the pod was deleted: %v", a, err)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mounts, []byte(string(pod.UID))) || bytes.Contains(mounts, []byte(sb.Status.Id)) {
		t.Errorf("a mount of the pod is left:\n%s", mounts)
	}
	if n, m := len(c.sandboxesOf(t, pod.UID)), len(c.containersOf(t, pod.UID)); n+m != 0 {
		t.Errorf("the runtime still has %d sandboxes and %d containers of the pod", n, m)
	}
}
