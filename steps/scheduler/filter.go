package scheduler

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// kube-scheduler's failure reasons, word for word: the FailedScheduling
// event and the PodScheduled condition count nodes by these.
const (
	ReasonUnschedulable   = "node(s) were unschedulable"
	ReasonNodeName        = "node(s) didn't match the requested node name"
	ReasonNodeAffinity    = "node(s) didn't match Pod's node affinity/selector"
	ReasonTooManyPods     = "Too many pods"
	reasonUntoleratedTmpl = "node(s) had untolerated taint {%s: %s}"
	reasonInsufficient    = "Insufficient %s"
)

// A FilterPlugin rules nodes out: a node where the pod cannot run, or must
// not. kube-scheduler runs the filters of its profile in order on every
// node, and stops at a node's first failing filter.
type FilterPlugin interface {
	// Name is the plugin's name in kube-scheduler's configuration.
	Name() string
	// Filter returns nil when the pod may go to the node, or the reasons
	// why not, in kube-scheduler's words.
	Filter(p *PodInfo, n *NodeInfo) []string
}

// NodeUnschedulable rules out a cordoned node (spec.unschedulable, set by
// kubectl cordon), unless the pod tolerates the taint
// node.kubernetes.io/unschedulable:NoSchedule.
type NodeUnschedulable struct{}

// Name implements FilterPlugin.
func (NodeUnschedulable) Name() string { return "NodeUnschedulable" }

// Filter implements FilterPlugin.
func (NodeUnschedulable) Filter(p *PodInfo, n *NodeInfo) []string {
	if !n.Node.Spec.Unschedulable {
		return nil
	}
	t := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if tolerated(p.Pod.Spec.Tolerations, &t) {
		return nil
	}
	return []string{ReasonUnschedulable}
}

// NodeName rules out every node but the one the pod names in
// spec.nodeName. (A pod that names its node never reaches the scheduler:
// the filter matters to those that run the filters on their own, such as
// preemption.)
type NodeName struct{}

// Name implements FilterPlugin.
func (NodeName) Name() string { return "NodeName" }

// Filter implements FilterPlugin.
func (NodeName) Filter(p *PodInfo, n *NodeInfo) []string {
	if p.Pod.Spec.NodeName == "" || p.Pod.Spec.NodeName == n.Name() {
		return nil
	}
	return []string{ReasonNodeName}
}

// NodeAffinity rules out nodes whose labels do not match the pod's
// spec.nodeSelector, or none of the terms of its
// affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
// (matchExpressions on labels with In, NotIn, Exists, DoesNotExist, Gt, Lt;
// matchFields on metadata.name).
type NodeAffinity struct{}

// Name implements FilterPlugin.
func (NodeAffinity) Name() string { return "NodeAffinity" }

// Filter implements FilterPlugin.
func (NodeAffinity) Filter(p *PodInfo, n *NodeInfo) []string {
	if p.affinity.matches(n.Node) {
		return nil
	}
	return []string{ReasonNodeAffinity}
}

// TaintToleration rules out a node with a NoSchedule or NoExecute taint
// the pod does not tolerate (the first such taint is the reason). As a
// score plugin, it prefers nodes with fewer PreferNoSchedule taints the pod
// does not tolerate.
type TaintToleration struct{}

// Name implements FilterPlugin and ScorePlugin.
func (TaintToleration) Name() string { return "TaintToleration" }

// Filter implements FilterPlugin.
func (TaintToleration) Filter(p *PodInfo, n *NodeInfo) []string {
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(p.Pod.Spec.Tolerations, t) {
			return []string{fmt.Sprintf(reasonUntoleratedTmpl, t.Key, t.Value)}
		}
	}
	return nil
}

// tolerated reports whether one of tolerations tolerates taint, by
// k8s.io/api's own rule (empty effect: every effect; Exists: every value;
// empty key with Exists: every taint). The Gt and Lt operators are an alpha
// feature, off by default in Kubernetes: here too.
func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// NodeResourcesFit rules out a node without room for the pod: the pod's
// requests (PodRequests) must fit in the node's allocatable resources minus
// what its pods already request, and one more pod must fit under its pod
// count. As a score plugin (the LeastAllocated strategy), it prefers the
// node that would have the most left.
type NodeResourcesFit struct{}

// Name implements FilterPlugin and ScorePlugin.
func (NodeResourcesFit) Name() string { return "NodeResourcesFit" }

// Filter implements FilterPlugin.
func (NodeResourcesFit) Filter(p *PodInfo, n *NodeInfo) []string {
	var reasons []string
	if int64(n.Pods)+1 > n.AllowedPods {
		reasons = append(reasons, ReasonTooManyPods)
	}
	req := p.Requests
	if req.MilliCPU == 0 && req.Memory == 0 && req.EphemeralStorage == 0 && len(req.Scalar) == 0 {
		return reasons
	}
	free := n.Allocatable.clone()
	free.minus(n.Requested)
	if req.MilliCPU > 0 && req.MilliCPU > free.MilliCPU {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficient, corev1.ResourceCPU))
	}
	if req.Memory > 0 && req.Memory > free.Memory {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficient, corev1.ResourceMemory))
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > free.EphemeralStorage {
		reasons = append(reasons, fmt.Sprintf(reasonInsufficient, corev1.ResourceEphemeralStorage))
	}
	names := make([]string, 0, len(req.Scalar))
	for name := range req.Scalar {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		rn := corev1.ResourceName(name)
		if req.Scalar[rn] > 0 && req.Scalar[rn] > free.Scalar[rn] {
			reasons = append(reasons, fmt.Sprintf(reasonInsufficient, name))
		}
	}
	return reasons
}
