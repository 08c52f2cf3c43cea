package kubelet_test

import (
	"context"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
)

// waitFor polls cond until it holds, or fails after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKubelet_Run: the sync loop, fed by the informer, registers the node,
// runs a pod bound to it, notices its exit on its own, and removes it after
// a delete.
func TestKubelet_Run(t *testing.T) {
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.Heartbeat = 100 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.kubelet.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	c.create(t, helloPod(t, "served"))
	once := helloPod(t, "once", "--once")
	once.Spec.RestartPolicy = corev1.RestartPolicyNever
	c.create(t, once)
	waitFor(t, 10*time.Second, "Running", func() bool { return running(c.get(t, "served")) })
	waitFor(t, 10*time.Second, "Succeeded", func() bool { return c.get(t, "once").Status.Phase == corev1.PodSucceeded })

	// The node: registered with this machine's capacity, Ready, and the
	// image it pulled listed; the heartbeat moves lastHeartbeatTime.
	node := getNode(t, c)
	if cpu := node.Status.Capacity[corev1.ResourceCPU]; cpu.Value() != int64(runtime.NumCPU()) {
		t.Errorf("capacity cpu %s, want %d", cpu.String(), runtime.NumCPU())
	}
	if pods := node.Status.Capacity[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("capacity pods %s", pods.String())
	}
	mem, alloc := node.Status.Capacity[corev1.ResourceMemory], node.Status.Allocatable[corev1.ResourceMemory]
	if mem.Value() <= 0 || mem.Value()-alloc.Value() != 100<<20 {
		t.Errorf("memory capacity %s, allocatable %s: want allocatable 100Mi less", mem.String(), alloc.String())
	}
	ready := nodeCondition(node, corev1.NodeReady)
	if ready == nil || ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" || ready.Message != "kubelet is posting ready status" {
		t.Errorf("Ready condition: %+v", ready)
	}
	for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if cd := nodeCondition(node, ct); cd == nil || cd.Status != corev1.ConditionFalse {
			t.Errorf("condition %s: %+v", ct, cd)
		}
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != kubelet.Version || info.ContainerRuntimeVersion != cri.Name+"://"+cri.Version || info.KernelVersion == "" || info.OSImage == "" {
		t.Errorf("nodeInfo: %+v", info)
	}
	if node.Labels["kubernetes.io/hostname"] != apiserver.HostNode {
		t.Errorf("labels: %v", node.Labels)
	}
	waitFor(t, 5*time.Second, "the image in status.images", func() bool {
		for _, im := range getNode(t, c).Status.Images {
			for _, n := range im.Names {
				if n == helloRef(t) && im.SizeBytes > 0 {
					return true
				}
			}
		}
		return false
	})
	beat := ready.LastHeartbeatTime
	waitFor(t, 5*time.Second, "a heartbeat", func() bool {
		r := nodeCondition(getNode(t, c), corev1.NodeReady)
		return r != nil && r.LastHeartbeatTime.After(beat.Time) && r.LastTransitionTime.Equal(&ready.LastTransitionTime)
	})

	// Delete: the kubelet sees the deletionTimestamp, stops and removes.
	served := c.get(t, "served")
	if _, err := c.admin.Delete(context.Background(), "pods", "default", "served", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "removed", func() bool {
		_, err := c.admin.Get(context.Background(), "pods", "default", "served")
		return apierrors.IsNotFound(err)
	})
	waitFor(t, 5*time.Second, "nothing left in the node's runtime", func() bool {
		return len(c.sandboxesOf(t, served.UID))+len(c.containersOf(t, served.UID)) == 0
	})
}

func getNode(t *testing.T, c *cluster) *corev1.Node {
	t.Helper()
	obj, err := c.admin.Get(context.Background(), "nodes", "", apiserver.HostNode)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Node)
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// TestKubelet_Register_DeclaredNode: a Node made by `podlab node add` keeps
// its declared capacity; the kubelet sets conditions, nodeInfo, images.
func TestKubelet_Register_DeclaredNode(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	declared := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("20")}
	_, err := c.admin.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: apiserver.HostNode, Labels: map[string]string{"disk": "ssd"}},
		Status: corev1.NodeStatus{Capacity: declared, Allocatable: declared,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusNeverUpdated"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.kubelet.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || !res.Declared {
		t.Errorf("created %v, declared %v; want an existing declared node", res.Created, res.Declared)
	}
	n := getNode(t, c)
	if cpu := n.Status.Capacity[corev1.ResourceCPU]; cpu.String() != "64" {
		t.Errorf("declared cpu 64 became %s", cpu.String())
	}
	if r := nodeCondition(n, corev1.NodeReady); r == nil || r.Status != corev1.ConditionTrue {
		t.Errorf("Ready: %+v", r)
	}
	if n.Status.NodeInfo.KubeletVersion != kubelet.Version || n.Labels["disk"] != "ssd" || n.Labels["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeInfo %+v, labels %v", n.Status.NodeInfo, n.Labels)
	}
}

// TestKubelet_CleanupOrphans: a pod deleted while its kubelet was away
// (forced) leaves containers, bundles and mounts; the next kubelet removes
// them when it starts.
func TestKubelet_CleanupOrphans(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	pod := c.create(t, helloPod(t, "orphan"))
	c.syncUntil(t, "orphan", 10*time.Second, "Running", running)
	if _, err := c.admin.Delete(ctx, "pods", "default", "orphan", apiserver.DeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	ctrs := c.containersOf(t, pod.UID)
	if len(ctrs) != 1 {
		t.Fatalf("the container should still be there: %v", ctrs)
	}
	in := c.inspect(t, ctrs[0].Id)
	sb := c.sandboxOf(t, pod.UID)
	// Another pod, still known, keeps everything.
	keep := c.create(t, helloPod(t, "keep"))
	c.syncUntil(t, "keep", 10*time.Second, "Running", running)
	if err := c.kubelet.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n, m := len(c.sandboxesOf(t, pod.UID)), len(c.containersOf(t, pod.UID)); n+m != 0 {
		t.Errorf("the runtime still has %d sandboxes and %d containers of the orphan", n, m)
	}
	for _, p := range []string{in.Info.Bundle, in.Info.RuncState, sb.Info.Namespaces["net"], sb.Info.PodDir} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	if len(c.sandboxesOf(t, keep.UID)) != 1 || len(c.containersOf(t, keep.UID)) != 1 {
		t.Errorf("the cleanup touched the pod the API server still has")
	}
	found := false
	for _, r := range c.stageReports() {
		if rr, ok := r.Result.(*kubelet.RemoveResult); ok && r.Leftovers && rr.UID == pod.UID {
			found = true
		}
	}
	if !found {
		t.Errorf("no report of the leftovers removed")
	}
}

// TestKubelet_CleanupOrphans_ByLabel: a sandbox of the runtime's labelled
// with the pod uid of a pod the API server does not have, made straight
// over CRI (no file of the kubelet's says anything of it), is found by
// ListPodSandbox and removed; a sandbox without the kubelet's label (one
// crictl made) is not the kubelet's and stays, and its directories, named
// by its sandbox id (pods/<id>, netns/<id>), are never taken for a pod's.
func TestKubelet_CleanupOrphans_ByLabel(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	mk := func(name string, labels map[string]string) string {
		t.Helper()
		resp, err := c.cri.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
			Hostname: name, Labels: labels}})
		if err != nil {
			t.Fatalf("RunPodSandbox %s: %v", name, err)
		}
		return resp.PodSandboxId
	}
	orphan := mk("orphan", map[string]string{kubelet.LabelPodUID: "uid-orphan"})
	other := mk("other", nil)
	t.Cleanup(func() {
		c.cri.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: other})
		c.cri.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: other})
	})
	if err := c.kubelet.CleanupOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if sbs := c.sandboxesOf(t, "uid-orphan"); len(sbs) != 0 {
		t.Errorf("the orphan's sandbox %s is still there: %v", orphan, sbs)
	}
	if _, err := c.cri.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: other}); err != nil {
		t.Errorf("the unlabelled sandbox %s went: %v", other, err)
	}
	removed := false
	for _, r := range c.stageReports() {
		rr, ok := r.Result.(*kubelet.RemoveResult)
		if !ok {
			continue
		}
		switch rr.UID {
		case "uid-orphan":
			removed = slices.Contains(rr.Sandboxes, orphan)
		case types.UID(other), types.UID(orphan):
			t.Errorf("a sandbox id was taken for a pod uid: %+v", rr)
		}
	}
	if !removed {
		t.Errorf("no report of the orphan's sandbox %s removed", orphan)
	}
}
