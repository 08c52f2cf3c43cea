package cri

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// A pod's whole life through the socket, as the kubelet drives it: the pod
// CIDR, pull, sandbox with a CNI address, create, start, logs, exec, port
// 8080 inside the pod, stats, stop, remove; then nothing is left.
func TestServer_PodLifecycle(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)

	st, err := n.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil || st.Status.Conditions[1].Status || st.Status.Conditions[1].Reason != "NetworkPluginNotReady" {
		t.Fatalf("Status before a pod CIDR: %v %v, want NetworkReady false, NetworkPluginNotReady", st, err)
	}
	if _, err := n.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.7.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	if st, err := n.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil || !st.Status.Conditions[1].Status {
		t.Fatalf("Status after UpdateRuntimeConfig: %v %v, want NetworkReady", st, err)
	}

	ref := host + "/podlab/hello:1.0"
	pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pulled.ImageRef, "sha256:") {
		t.Fatalf("PullImage answered %q, want the image id sha256:...", pulled.ImageRef)
	}
	is, err := n.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef}})
	if err != nil || is.Image == nil || len(is.Image.RepoTags) != 1 || is.Image.RepoTags[0] != ref {
		t.Fatalf("ImageStatus(%s) = %v %v, want repo tag %s", pulled.ImageRef, is, err, ref)
	}

	logDir := t.TempDir()
	pc := podConfig("web")
	pc.LogDirectory = logDir
	podCgroup := n.node.KubepodsCgroup() + "/besteffort/poduid-web"
	pc.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: podCgroup}
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR("10.244.7.0/24")
	if ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || !cidr.Contains(net.ParseIP(ps.Status.Network.Ip)) {
		t.Fatalf("sandbox status %v, want READY with an IP in %s", ps.Status, cidr)
	}
	for _, k := range []string{"net", "ipc", "uts"} {
		if !isNamespaceMount(n.node.NamespaceFile(k, sb.PodSandboxId)) {
			t.Errorf("no %s namespace pinned at %s", k, n.node.NamespaceFile(k, sb.PodSandboxId))
		}
	}

	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
		Config: helloConfig(pulled.ImageRef), SandboxConfig: pc})
	if err != nil {
		t.Fatal(err)
	}
	cs := containerStatus(t, n, cr.ContainerId)
	if cs.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("after CreateContainer: %s, want CONTAINER_CREATED", cs.State)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if cs := containerStatus(t, n, cr.ContainerId); cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING ||
		cs.LogPath != filepath.Join(logDir, "hello/0.log") || cs.ImageId != pulled.ImageRef {
		t.Fatalf("after StartContainer: %v, want CONTAINER_RUNNING, its log at %s, image %s", cs, filepath.Join(logDir, "hello/0.log"), pulled.ImageRef)
	}
	// The container's cgroup is under the sandbox's cgroup_parent.
	if st, err := n.srv.rt.State(ctx, cr.ContainerId); err != nil || st.Cgroup == nil || st.Cgroup.Path != podCgroup+"/"+cr.ContainerId {
		t.Fatalf("the container's cgroup: %+v %v, want %s/%s", st.Cgroup, err, podCgroup, cr.ContainerId)
	}
	// The CRI log, where the configs say: "<time> stdout F <line>".
	waitFor(t, 10*time.Second, "the greeting in the CRI log", func() bool {
		b, _ := os.ReadFile(filepath.Join(logDir, "hello/0.log"))
		return strings.Contains(string(b), " stdout F Hello over CRI")
	})
	// The hostname is the sandbox's UTS namespace's.
	ex, err := n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cr.ContainerId, Cmd: []string{"/hello", "--once"}, Timeout: 10})
	if err != nil || ex.ExitCode != 0 || !strings.Contains(string(ex.Stdout), "web") {
		t.Fatalf("ExecSync /hello --once: %v %v, want exit 0 and the pod's hostname web", ex, err)
	}
	// Port 8080 inside the pod, as PortForward reaches it.
	conn, err := dialInNetns(ctx, n.node.NamespaceFile("net", sb.PodSandboxId), "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET / on port 8080 in the pod: %v %v", resp, err)
	}
	stats, err := n.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cr.ContainerId})
	if err != nil || stats.Stats.Memory == nil || stats.Stats.Memory.UsageBytes.Value == 0 {
		t.Fatalf("ContainerStats: %v %v, want memory usage", stats, err)
	}
	list, err := n.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.PodSandboxId[:13]}})
	if err != nil || len(list.Containers) != 1 || list.Containers[0].Id != cr.ContainerId {
		t.Fatalf("ListContainers by a 13-character sandbox id: %v %v", list, err)
	}

	if _, err := n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cr.ContainerId, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if cs := containerStatus(t, n, cr.ContainerId); cs.State != runtimeapi.ContainerState_CONTAINER_EXITED || cs.FinishedAt == 0 {
		t.Fatalf("after StopContainer: %v, want CONTAINER_EXITED", cs)
	}
	bundle := n.node.CRIBundle(sb.PodSandboxId, cr.ContainerId)
	if _, err := n.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	if ps, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId}); err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("after StopPodSandbox: %v %v, want NOTREADY", ps, err)
	}
	if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	// The log stays: it is the kubelet's to remove, as with containerd.
	if _, err := os.Lstat(filepath.Join(logDir, "hello/0.log")); err != nil {
		t.Errorf("the log link went with RemoveContainer: %v", err)
	}
	for _, p := range []string{bundle, n.node.NamespaceFile("net", sb.PodSandboxId),
		n.node.PodDir(sb.PodSandboxId), n.srv.rec.sandboxPath(sb.PodSandboxId), n.srv.rec.containerPath(cr.ContainerId)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after RemovePodSandbox", p)
		}
	}
	if l, err := n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("ListPodSandbox after the remove: %v %v", l, err)
	}
}

func containerStatus(t *testing.T, n *node, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	st, err := n.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	return st.Status
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
