package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestNodeHealth_ADeadNode: a node dies and comes back, with every part
// real: `podlab apiserver` over HTTPS, a kubelet renewing its Lease every
// second (--node-lease-duration-seconds 4), the controller-manager with a
// 3 s grace period, and kubectl 1.37 reading. The silent node goes
// Ready=Unknown and is tainted unreachable:NoExecute, its running pod
// Ready=False; its kubelet started again clears them all.
func TestNodeHealth_ADeadNode(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	ref := helloRegistry(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}
	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	health := func() string { // "" until the node registers
		out, _ := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", "node-1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason} {.spec.taints[*].key}:{.spec.taints[*].effect}`)
		return out
	}

	kubelet, klog := startComponent(t, state, "kubelet", "--port", "0", "--node-lease-duration-seconds", "4")
	_, cmlog := startComponent(t, state, "controller-manager", "--verbosity", "2",
		"--node-monitor-grace-period", "3s", "--node-monitor-period", "500ms")
	waitFor(t, 30*time.Second, func() bool { return strings.HasPrefix(health(), "True KubeletReady") }, "node-1 Ready", klog)
	startComponent(t, state, "scheduler")
	mustPodlab(t, state, "run", "web", "--image", ref)
	waitRunning(t, state, 60*time.Second, "web")
	podReady := func() string {
		return admin("get", "pod", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	}
	waitFor(t, 10*time.Second, func() bool { return podReady() == "True" }, "pod web Ready", klog)
	leases := admin("get", "leases", "-n", "kube-node-lease")
	if !strings.HasPrefix(leases, "NAME     HOLDER   AGE\nnode-1   node-1   ") {
		t.Errorf("kubectl get leases -n kube-node-lease:\n%s", leases)
	}
	if out := mustPodlab(t, state, "get", "leases", "-n", "kube-node-lease"); !strings.Contains(out, "node-1   node-1   ") {
		t.Errorf("podlab get leases -n kube-node-lease:\n%s", out)
	}
	if owner := admin("get", "lease", "-n", "kube-node-lease", "node-1", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.spec.leaseDurationSeconds}"); owner != "Node/node-1 4" {
		t.Errorf("the Lease's owner and duration: %q, want Node/node-1 4", owner)
	}
	if !strings.Contains(klog.String(), "node node-1: created Lease kube-node-lease/node-1 (holder node-1, leaseDurationSeconds 4); renewing it every 1s") {
		t.Errorf("the kubelet does not say it created its Lease:\n%s", klog.String())
	}
	if !strings.Contains(cmlog.String(), "watching deployments, replicasets and pods, and the nodes' health (grace period 3s)") {
		t.Errorf("the controller-manager does not show its grace period:\n%s", cmlog.String())
	}

	// The node dies: its kubelet stops.
	kubelet.Process.Signal(syscall.SIGINT)
	kubelet.Wait()
	waitFor(t, 20*time.Second, func() bool {
		return health() == "Unknown NodeStatusUnknown node.kubernetes.io/unreachable:NoExecute"
	}, "node-1 Unknown and tainted", cmlog)
	if msg := admin("get", "node", "node-1", "-o", `jsonpath={.status.conditions[?(@.type=="MemoryPressure")].status}: {.status.conditions[?(@.type=="Ready")].message}`); msg != "Unknown: Kubelet stopped posting node status." {
		t.Errorf("node-1's conditions: %q", msg)
	}
	if !strings.Contains(cmlog.String(), `"Node is unresponsive. Adding it to the Taint queue" logger="node-lifecycle-controller" node="node-1"`) {
		t.Errorf("the controller-manager's log does not say it tainted node-1:\n%s", cmlog.String())
	}
	if nodes := admin("get", "nodes"); !strings.Contains(nodes, "node-1   NotReady") {
		t.Errorf("kubectl get nodes:\n%s", nodes)
	}
	if r := podReady(); r != "False" {
		t.Errorf("pod web on the dead node: Ready=%s, want False", r)
	}

	// It comes back.
	_, klog = startComponent(t, state, "kubelet", "--port", "0", "--node-lease-duration-seconds", "4")
	waitFor(t, 30*time.Second, func() bool { return health() == "True KubeletReady :" }, "node-1 Ready and untainted", cmlog)
	waitFor(t, 10*time.Second, func() bool { return podReady() == "True" }, "pod web Ready again", klog)
	mustPodlab(t, state, "delete", "pod", "web")
	waitGone(t, state, 60*time.Second)
}

// TestControllerManager_BadGracePeriod: a grace period that is not
// positive is refused before anything starts, naming the flag.
func TestControllerManager_BadGracePeriod(t *testing.T) {
	state := testenv.StateDir(t)
	for _, args := range [][]string{
		{"--node-monitor-grace-period", "0s"},
		{"--node-monitor-grace-period", "-5s"},
		{"--node-monitor-period", "0s"},
	} {
		out, err := controllerManagerApp(t, state, append([]string{"controller-manager"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]+" "+strings.TrimSuffix(args[1], "0s")) || !strings.Contains(err.Error(), "must be more than 0") {
			t.Errorf("controller-manager %s: err %v, want one naming the flag\n%s", strings.Join(args, " "), err, out)
		}
	}
}
