package kubelet

// The pod network. The kubelet does not call CNI: it hands the runtime the
// node's spec.podCIDR (CRI UpdateRuntimeConfig), and the runtime, which
// knows CNI, renders its network configuration from it and attaches every
// sandbox it makes (ADD) and detaches every sandbox it stops (DEL). The
// runtime's PodSandboxStatus gives the pod's IPs, which the kubelet
// reports as status.podIP and podIPs.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// noPodCIDRNote is what the kubelet says, once, when it asks for a sandbox
// with no network because its Node has no pod CIDR.
const noPodCIDRNote = "node %s has no spec.podCIDR: pods get a network namespace with lo only and no IP " +
	"(start the controller-manager with --allocate-node-cidrs --cluster-cidr 10.244.0.0/16 to give nodes pod CIDRs)"

// RuntimeConfig is what the kubelet handed the runtime of its Node's pod
// CIDR (CRI UpdateRuntimeConfig).
type RuntimeConfig struct {
	// PodCIDR is the Node's spec.podCIDR.
	PodCIDR string
	// Changed is true when this call handed the runtime a pod CIDR this
	// kubelet had not handed it yet (the kubelet's updatePodCIDR does the
	// same: only a change is sent).
	Changed bool
}

// UpdateRuntimeConfig hands the runtime the pod CIDR of node (CRI
// UpdateRuntimeConfig): the runtime renders its CNI configuration from it,
// as containerd renders its conf_template. A node without a pod CIDR, or
// with the one handed already, changes nothing.
func (k *Kubelet) UpdateRuntimeConfig(ctx context.Context, node *corev1.Node) (*RuntimeConfig, error) {
	rc := &RuntimeConfig{PodCIDR: node.Spec.PodCIDR}
	if rc.PodCIDR == "" {
		return rc, nil
	}
	k.mu.Lock()
	sent := k.podCIDR == rc.PodCIDR
	k.mu.Unlock()
	if sent {
		return rc, nil
	}
	_, err := k.cri.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: rc.PodCIDR}}})
	if err != nil {
		return rc, fmt.Errorf("handing the runtime the pod CIDR %s of node %s (UpdateRuntimeConfig): %w", rc.PodCIDR, node.Name, err)
	}
	k.mu.Lock()
	k.podCIDR = rc.PodCIDR
	k.mu.Unlock()
	rc.Changed = true
	return rc, nil
}

// ensurePodCIDR makes sure the runtime has the Node's pod CIDR before a
// sandbox is made: the RuntimeConfig when this call handed it over, and
// a note, the first time only, when the Node has none (the pod then gets
// lo alone).
func (k *Kubelet) ensurePodCIDR(ctx context.Context) (*RuntimeConfig, string, error) {
	node := &corev1.Node{} // not registered (a stage run by hand): no pod CIDR
	obj, err := k.client.Get(ctx, "nodes", "", k.node)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("reading node %s for its pod CIDR: %w", k.node, err)
	}
	if err == nil {
		node = obj.(*corev1.Node)
	}
	rc, err := k.UpdateRuntimeConfig(ctx, node)
	if err != nil {
		return nil, "", err
	}
	if rc.PodCIDR == "" {
		k.mu.Lock()
		said := k.saidNoPodCIDR
		k.saidNoPodCIDR = true
		k.mu.Unlock()
		if !said {
			return nil, fmt.Sprintf(noPodCIDRNote, k.node), nil
		}
		return nil, "", nil
	}
	if !rc.Changed {
		rc = nil
	}
	return rc, "", nil
}

// podIPs are the pod's IPs from its sandbox's status, for its status.
func podIPs(sb Sandbox) (string, []corev1.PodIP) {
	if len(sb.IPs) == 0 {
		return "", nil
	}
	var ips []corev1.PodIP
	for _, ip := range sb.IPs {
		ips = append(ips, corev1.PodIP{IP: ip})
	}
	return ips[0].IP, ips
}
