package cri

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// A restarted runtime knows the sandboxes and containers of the last one,
// and removes what creates it did not finish had made: the container runc
// created (its process, cgroups, state), its bundle and log link, and a
// sandbox's pinned namespaces.
func TestServer_Restart(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	host := labRegistry(t)
	dir := testenv.StateDir(t)
	n := startNode(t, dir)
	ref := host + "/podlab/hello:1.0"
	if _, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	// A whole pod, running.
	pc := podConfig("kept")
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig(ref)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	// A container whose create got as far as runc create, and a sandbox
	// whose namespaces were pinned, both still "creating": what a runtime
	// killed at those moments leaves.
	half, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "half"}, Image: &runtimeapi.ImageSpec{Image: ref}}})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := n.srv.rec.container(half.ContainerId)
	if err != nil {
		t.Fatal(err)
	}
	hc.State = stateCreating
	if err := n.srv.rec.putContainer(hc); err != nil {
		t.Fatal(err)
	}
	st, err := n.srv.rt.State(ctx, half.ContainerId)
	if err != nil || st.Status != "created" || st.Cgroup == nil || len(st.Cgroup.Dirs) == 0 {
		t.Fatalf("the half-made container: %+v %v, want runc's created container with its cgroups", st, err)
	}
	cgroups := st.Cgroup.Dirs
	hsb := &sandboxRecord{ID: newID(), State: stateCreating, config: podConfig("half"), Namespaces: map[string]string{}}
	for _, k := range []string{"net", "ipc", "uts"} {
		hsb.Namespaces[k] = n.node.NamespaceFile(k, hsb.ID)
	}
	if err := n.srv.rec.putSandbox(hsb); err != nil {
		t.Fatal(err)
	}
	if err := pinNamespaces([]string{"net", "ipc", "uts"}, hsb.Namespaces, "half", nil, nil); err != nil {
		t.Fatal(err)
	}
	n.stop()

	// The restart: New cleans, and the clients see the whole pod again.
	_, cleaned, err := New(ctx, testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range cleaned {
		got[c.Kind+" "+c.ID] = true
	}
	if !got["container "+half.ContainerId] || !got["sandbox "+hsb.ID] || len(cleaned) != 2 {
		t.Fatalf("cleaned %+v, want the half-made container %s and sandbox %s", cleaned, half.ContainerId, hsb.ID)
	}
	left := append([]string{hc.Bundle, n.srv.rt.ContainerDir(half.ContainerId), filepath.Join(n.srv.rt.RootDir(), half.ContainerId),
		n.srv.rec.containerPath(half.ContainerId), n.srv.rec.sandboxPath(hsb.ID)}, cgroups...)
	for _, p := range hsb.Namespaces {
		left = append(left, p)
	}
	for _, p := range left {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after the restart", p)
		}
	}
	n2 := startNode(t, dir)
	defer n2.cleanupSandboxes(t)
	l, err := n2.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(l.Containers) != 1 || l.Containers[0].Id != cr.ContainerId || l.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers after the restart: %v %v, want %s running", l, err, cr.ContainerId)
	}
	ps, err := n2.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(ps.Items) != 1 || ps.Items[0].Id != sb.PodSandboxId || ps.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("ListPodSandbox after the restart: %v %v, want %s ready", ps, err, sb.PodSandboxId)
	}
}
