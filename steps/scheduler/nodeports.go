package scheduler

import (
	corev1 "k8s.io/api/core/v1"
)

// ReasonNodePorts is kube-scheduler's NodePorts failure reason, word for
// word.
const ReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

// NodePorts rules out a node where a pod already holds a hostPort the pod
// asks for: a hostPort is the node's (portmap DNATs it from the node's
// addresses), so two pods cannot both have it. Two ports conflict when
// their protocols and numbers are the same and their hostIPs are the same
// or either is unset or 0.0.0.0, which means every address
// (kube-scheduler's HostPortInfo.CheckConflict).
type NodePorts struct{}

// Name implements FilterPlugin.
func (NodePorts) Name() string { return "NodePorts" }

// Filter implements FilterPlugin.
func (NodePorts) Filter(p *PodInfo, n *NodeInfo) []string {
	want := hostPortsOf(p.Pod)
	if len(want) == 0 {
		return nil
	}
	for _, m := range n.pods {
		for _, have := range m.hostPorts {
			for _, w := range want {
				if w.conflicts(have) {
					return []string{ReasonNodePorts}
				}
			}
		}
	}
	return nil
}

// hostPort is one hostPort a pod holds on its node.
type hostPort struct {
	ip       string // "0.0.0.0" when unset
	protocol corev1.Protocol
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	if a.port != b.port || a.protocol != b.protocol {
		return false
	}
	return a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0"
}

// hostPortsOf are the hostPorts of a pod's containers, with the defaults
// (TCP, every address) filled in.
func hostPortsOf(pod *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: cp.HostIP, protocol: cp.Protocol, port: cp.HostPort}
			if hp.ip == "" || hp.ip == "::" {
				hp.ip = "0.0.0.0"
			}
			if hp.protocol == "" {
				hp.protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	return out
}
