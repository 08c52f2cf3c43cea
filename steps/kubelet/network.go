package kubelet

// The pod network. The kubelet does not call CNI: it hands the runtime the
// node's spec.podCIDR (CRI UpdateRuntimeConfig), and the runtime, which
// knows CNI, renders its network configuration from it and attaches every
// sandbox it makes (ADD) and detaches every sandbox it removes (DEL),
// through package steps/cni. The runtime's PodSandboxStatus gives the
// pod's IPs, which the kubelet reports as status.podIP and podIPs.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/cni"
)

// noPodCIDRNote is what the kubelet says, once, when it makes a sandbox
// with no network because its Node has no pod CIDR.
const noPodCIDRNote = "node %s has no spec.podCIDR: pods get a network namespace with lo only and no IP " +
	"(start the controller-manager with --allocate-node-cidrs --cluster-cidr 10.244.0.0/16 to give nodes pod CIDRs)"

// RuntimeConfig is what the kubelet handed the runtime of its Node's pod
// CIDR, and what the runtime did with it.
type RuntimeConfig struct {
	// PodCIDR is the Node's spec.podCIDR.
	PodCIDR string
	// ConfList is the network configuration the runtime wrote from it;
	// Changed is true when this call wrote it.
	ConfList string
	Changed  bool
}

// sandboxID is the pod's sandbox id, the CNI ContainerID and
// K8S_POD_INFRA_CONTAINER_ID. containerd makes a random 64-hex id; podlab
// names a sandbox by its pod's uid, as it names the namespace mounts, so
// that a pod's leftovers are found from its uid alone.
func sandboxID(uid types.UID) string { return string(uid) }

// UpdateRuntimeConfig hands the runtime the pod CIDR of node (CRI
// UpdateRuntimeConfig): the runtime renders its CNI configuration from it,
// as containerd renders its conf_template. A node without a pod CIDR
// changes nothing.
func (k *Kubelet) UpdateRuntimeConfig(node *corev1.Node) (*RuntimeConfig, error) {
	rc := &RuntimeConfig{PodCIDR: node.Spec.PodCIDR}
	if rc.PodCIDR == "" {
		return rc, nil
	}
	path, changed, err := cni.WriteConfList(k.layout.CNIConfDir(), cni.Template{
		PodCIDR: rc.PodCIDR, Bridge: k.layout.BridgeName(), DataDir: k.layout.CNIIPAMDir()})
	if err != nil {
		return rc, fmt.Errorf("configuring the pod network of node %s: %w", node.Name, err)
	}
	rc.ConfList, rc.Changed = path, changed
	return rc, nil
}

// syncPodCIDR reads the kubelet's Node and hands its pod CIDR to the
// runtime: what the kubelet's node status loop does when spec.podCIDR
// appears.
func (k *Kubelet) syncPodCIDR(ctx context.Context) (*RuntimeConfig, error) {
	obj, err := k.client.Get(ctx, "nodes", "", k.node)
	if apierrors.IsNotFound(err) {
		return &RuntimeConfig{}, nil // not registered (a stage run by hand): no pod CIDR
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s for its pod CIDR: %w", k.node, err)
	}
	return k.UpdateRuntimeConfig(obj.(*corev1.Node))
}

// needsNetwork reports whether the pod's sandbox is attached to the pod
// network: every pod but hostNetwork ones.
func needsNetwork(pod *corev1.Pod) bool { return !pod.Spec.HostNetwork }

// observeNetwork adds the sandbox's attachment, as the runtime's cache
// records it, to sb; a sandbox the network should have and does not is not
// Ready (the sandbox stage attaches it).
func (k *Kubelet) observeNetwork(pod *corev1.Pod, sb *Sandbox) {
	if !needsNetwork(pod) {
		return
	}
	if r, ok, err := k.network.Status(sandboxID(pod.UID)); err == nil && ok {
		sb.Network = r
		return
	}
	if sb.Ready && k.network.Configured() {
		sb.Ready = false
	}
}

// attachNetwork attaches the pod's pinned network namespace to the pod
// network (the runtime's ADD). With no network configuration yet, the
// kubelet first asks its Node for the pod CIDR and hands it to the runtime
// (noted in sr); with none even then, the pod keeps lo alone, and note
// says so, the first time only.
func (k *Kubelet) attachNetwork(ctx context.Context, pod *corev1.Pod, sr *SandboxResult) (res *cni.Result, note string, err error) {
	if !k.network.Configured() {
		rc, err := k.syncPodCIDR(ctx)
		if err != nil {
			return nil, "", err
		}
		if rc.Changed {
			sr.RuntimeConfig = rc
		}
	}
	if !k.network.Configured() {
		k.mu.Lock()
		said := k.saidNoPodCIDR
		k.saidNoPodCIDR = true
		k.mu.Unlock()
		if !said {
			note = fmt.Sprintf(noPodCIDRNote, k.node)
		}
		return nil, note, nil
	}
	res, err = k.network.Setup(ctx, cni.Attachment{
		ID:           sandboxID(pod.UID),
		NetNS:        k.layout.NamespacePath("net", pod.UID),
		PodNamespace: pod.Namespace,
		PodName:      pod.Name,
		PodUID:       string(pod.UID),
		PortMappings: portMappings(pod),
	})
	return res, "", err
}

// portMappings are the pod's hostPorts, as the kubelet hands them to the
// runtime (kuberuntime's makePortMappings) and containerd to portmap:
// protocol in lower case, TCP by default.
func portMappings(pod *corev1.Pod) []cni.PortMapping {
	var out []cni.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			out = append(out, cni.PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP})
		}
	}
	return out
}

// podIPs are the pod's IPs from its sandbox's attachment, for its status.
func podIPs(sb Sandbox) (string, []corev1.PodIP) {
	if sb.Network == nil || len(sb.Network.IPs) == 0 {
		return "", nil
	}
	var ips []corev1.PodIP
	for _, ip := range sb.Network.IPs {
		ips = append(ips, corev1.PodIP{IP: ip.String()})
	}
	return ips[0].IP, ips
}
