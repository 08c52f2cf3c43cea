package scheduler

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// What kube-scheduler counts for a container that states no request, when it
// scores (never when it filters): without them, many pods that request
// nothing would all land on one node, which looks empty.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resources is an amount of compute resources in the units kube-scheduler
// counts: millicores of CPU, bytes of memory and of ephemeral storage, and
// the integer value of any other (extended) resource, such as nvidia.com/gpu.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Scalar           map[corev1.ResourceName]int64
}

// resourcesOf reads a ResourceList (pods are not a resource a pod requests:
// they are counted apart).
func resourcesOf(rl corev1.ResourceList) Resources {
	var r Resources
	r.add(rl)
	return r
}

func (r *Resources) add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
		default:
			r.setScalar(name, r.Scalar[name]+q.Value())
		}
	}
}

func (r *Resources) setScalar(name corev1.ResourceName, v int64) {
	if r.Scalar == nil {
		r.Scalar = map[corev1.ResourceName]int64{}
	}
	r.Scalar[name] = v
}

// plus adds o to r.
func (r *Resources) plus(o Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	for n, v := range o.Scalar {
		r.setScalar(n, r.Scalar[n]+v)
	}
}

// minus takes o from r.
func (r *Resources) minus(o Resources) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	for n, v := range o.Scalar {
		r.setScalar(n, r.Scalar[n]-v)
	}
}

// atLeast raises each of r's amounts to o's where o's is larger.
func (r *Resources) atLeast(o Resources) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	for n, v := range o.Scalar {
		r.setScalar(n, max(r.Scalar[n], v))
	}
}

func (r Resources) clone() Resources {
	c := r
	if r.Scalar != nil {
		c.Scalar = make(map[corev1.ResourceName]int64, len(r.Scalar))
		for n, v := range r.Scalar {
			c.Scalar[n] = v
		}
	}
	return c
}

// String is "cpu 500m, memory 256Mi", or "nothing".
func (r Resources) String() string {
	var parts []string
	if r.MilliCPU != 0 {
		parts = append(parts, "cpu "+resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI).String())
	}
	if r.Memory != 0 {
		parts = append(parts, "memory "+resource.NewQuantity(r.Memory, resource.BinarySI).String())
	}
	if r.EphemeralStorage != 0 {
		parts = append(parts, "ephemeral-storage "+resource.NewQuantity(r.EphemeralStorage, resource.BinarySI).String())
	}
	names := make([]string, 0, len(r.Scalar))
	for n, v := range r.Scalar {
		if v != 0 {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, r.Scalar[corev1.ResourceName(n)]))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// PodRequests is what a pod asks of a node, summed as kube-scheduler sums it
// (k8s.io/component-helpers/resource.PodRequests):
//
//   - the regular containers run together: their requests add up;
//   - init containers run one after the other, before them: the pod needs
//     the largest of them, so it requests the larger of that and the sum;
//   - sidecars (init containers with restartPolicy Always) keep running:
//     they add to the sum, and to every init container started after them;
//   - pod-level requests (spec.resources), where set, replace the
//     containers' sum for cpu and memory;
//   - the RuntimeClass's overhead (spec.overhead) is added.
//
// With nonZero, a container that states no cpu (memory) request counts
// DefaultMilliCPURequest (DefaultMemoryRequest): what the scoring plugins
// use; the filters use the requests as written.
func PodRequests(pod *corev1.Pod, nonZero bool) Resources {
	container := func(c *corev1.Container) Resources {
		r := resourcesOf(c.Resources.Requests)
		if nonZero {
			if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
				r.MilliCPU = DefaultMilliCPURequest
			}
			if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
				r.Memory = DefaultMemoryRequest
			}
		}
		return r
	}
	var sum Resources
	for i := range pod.Spec.Containers {
		sum.plus(container(&pod.Spec.Containers[i]))
	}
	var sidecars, inits Resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := container(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.plus(r)
			sidecars.plus(r)
			inits.atLeast(sidecars)
			continue
		}
		r.plus(sidecars)
		inits.atLeast(r)
	}
	sum.atLeast(inits)
	if pl := pod.Spec.Resources; pl != nil {
		if q, ok := pl.Requests[corev1.ResourceCPU]; ok {
			sum.MilliCPU = q.MilliValue()
		}
		if q, ok := pl.Requests[corev1.ResourceMemory]; ok {
			sum.Memory = q.Value()
		}
	}
	sum.add(pod.Spec.Overhead)
	return sum
}

// PodInfo is a pod with what the plugins need from it, computed once per
// scheduling cycle (kube-scheduler's PreFilter state).
type PodInfo struct {
	Pod *corev1.Pod
	// Requests are what NodeResourcesFit checks against a node's free
	// resources, and what NodeResourcesBalancedAllocation balances.
	Requests Resources
	// NonZeroRequests count DefaultMilliCPURequest and DefaultMemoryRequest
	// for containers that state none: what LeastAllocated scores with.
	NonZeroRequests Resources
	affinity        requiredAffinity
}

// NewPodInfo prepares pod for a scheduling cycle.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	return &PodInfo{
		Pod:             pod,
		Requests:        PodRequests(pod, false),
		NonZeroRequests: PodRequests(pod, true),
		affinity:        newRequiredAffinity(pod),
	}
}

// Key is namespace/name.
func (p *PodInfo) Key() string { return p.Pod.Namespace + "/" + p.Pod.Name }

// NodeInfo is one node as the scheduler sees it: the Node object, what its
// pods already request, and the taints that count.
type NodeInfo struct {
	Node *corev1.Node
	// Allocatable is status.allocatable: the capacity minus what the
	// kubelet reserves for the system.
	Allocatable Resources
	// AllowedPods is status.allocatable.pods.
	AllowedPods int64
	// Requested and NonZeroRequested sum the pods already on the node
	// (bound, or assumed while their binding is on its way), not
	// terminated.
	Requested        Resources
	NonZeroRequested Resources
	Pods             int
	// Taints are spec.taints, then ImpliedTaints.
	Taints []corev1.Taint
	// ImpliedTaints are the NoSchedule taints Kubernetes' node lifecycle
	// controller would add from the node's conditions (see ImpliedTaints).
	ImpliedTaints []corev1.Taint
	// Images are status.images, by every name of each, with their sizes.
	Images map[string]int64
	// pods are the pods counted on the node, with what PodTopologySpread
	// matches. Only ever appended to or replaced, never changed in place,
	// so that a clone may share it.
	pods []podMeta
}

// podMeta is what PodTopologySpread needs of a pod on a node.
type podMeta struct {
	key       string // namespace/name
	namespace string
	labels    map[string]string
	deleting  bool
	hostPorts []hostPort // what NodePorts checks
	priority  int32      // what preemption compares
}

func podMetaOf(pod *corev1.Pod) podMeta {
	return podMeta{key: pod.Namespace + "/" + pod.Name, namespace: pod.Namespace, labels: pod.Labels, deleting: pod.DeletionTimestamp != nil,
		hostPorts: hostPortsOf(pod), priority: podPriority(pod)}
}

// podPriority is spec.priority, 0 when unset (corev1helpers.PodPriority).
func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// NewNodeInfo returns node with pods counted on it. Pods that have finished
// (Succeeded or Failed) use nothing and are not counted, as kube-scheduler's
// pod informer leaves them out.
func NewNodeInfo(node *corev1.Node, pods ...*corev1.Pod) *NodeInfo {
	n := &NodeInfo{}
	n.setNode(node)
	for _, p := range pods {
		if !Terminated(p) {
			n.addPod(podMetaOf(p), PodRequests(p, false), PodRequests(p, true))
		}
	}
	return n
}

func (n *NodeInfo) setNode(node *corev1.Node) {
	n.Node = node
	n.Allocatable = resourcesOf(node.Status.Allocatable)
	n.AllowedPods = node.Status.Allocatable.Pods().Value()
	n.ImpliedTaints = ImpliedTaints(node)
	n.Taints = append(append([]corev1.Taint(nil), node.Spec.Taints...), n.ImpliedTaints...)
	n.Images = map[string]int64{}
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			n.Images[name] = img.SizeBytes
		}
	}
}

func (n *NodeInfo) addPod(m podMeta, req, nonZero Resources) {
	n.pods = append(n.pods, m)
	n.Requested.plus(req)
	n.NonZeroRequested.plus(nonZero)
	n.Pods++
}

func (n *NodeInfo) removePod(key string, req, nonZero Resources) {
	pods := make([]podMeta, 0, len(n.pods))
	for _, m := range n.pods {
		if m.key != key {
			pods = append(pods, m)
		}
	}
	n.pods = pods
	n.Requested.minus(req)
	n.NonZeroRequested.minus(nonZero)
	n.Pods--
}

// Name is the node's name.
func (n *NodeInfo) Name() string { return n.Node.Name }

// clone copies what a cycle may see change under it (the counts), sharing
// the node and its taints, which are replaced, never changed.
func (n *NodeInfo) clone() *NodeInfo {
	c := *n
	c.Requested = n.Requested.clone()
	c.NonZeroRequested = n.NonZeroRequested.clone()
	return &c
}

// Terminated reports whether a pod has finished for good (Succeeded or
// Failed): it holds no resources on its node any more.
func Terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// conditionTaint is the node lifecycle controller's map from a node
// condition to the NoSchedule taint it puts on the node
// (nodeConditionToTaintKeyStatusMap in kube-controller-manager), "" for
// none.
func conditionTaint(c corev1.NodeCondition) string {
	switch {
	case c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse:
		return corev1.TaintNodeNotReady
	case c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown:
		return corev1.TaintNodeUnreachable
	case c.Status != corev1.ConditionTrue:
		return ""
	case c.Type == corev1.NodeMemoryPressure:
		return corev1.TaintNodeMemoryPressure
	case c.Type == corev1.NodeDiskPressure:
		return corev1.TaintNodeDiskPressure
	case c.Type == corev1.NodeNetworkUnavailable:
		return corev1.TaintNodeNetworkUnavailable
	case c.Type == corev1.NodePIDPressure:
		return corev1.TaintNodePIDPressure
	}
	return ""
}

// ImpliedTaints are the NoSchedule taints Kubernetes' node lifecycle
// controller (in kube-controller-manager) would have put on node, and that
// podlab, which runs no such controller, has the scheduler assume instead:
//
//   - Ready False: node.kubernetes.io/not-ready;
//   - Ready Unknown, or no Ready condition yet (a node whose kubelet never
//     posted its status; the controller marks it Unknown): node.kubernetes.io/unreachable;
//   - MemoryPressure, DiskPressure, PIDPressure or NetworkUnavailable True:
//     node.kubernetes.io/memory-pressure, disk-pressure, pid-pressure,
//     network-unavailable;
//   - spec.unschedulable (kubectl cordon): node.kubernetes.io/unschedulable.
//
// A taint the node already has (same key and effect) is not repeated. The
// API server's DefaultTolerationSeconds admission gives every pod
// tolerations of not-ready and unreachable for NoExecute only (for 300s):
// they do not tolerate these NoSchedule taints, so new pods go to nodes
// whose kubelet reports Ready.
func ImpliedTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	add := func(key string) {
		t := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
		for _, have := range node.Spec.Taints {
			if have.Key == t.Key && have.Effect == t.Effect {
				return
			}
		}
		for _, have := range out {
			if have.Key == t.Key {
				return
			}
		}
		out = append(out, t)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = true
		}
		if key := conditionTaint(c); key != "" {
			add(key)
		}
	}
	if !ready {
		add(corev1.TaintNodeUnreachable)
	}
	if node.Spec.Unschedulable {
		add(corev1.TaintNodeUnschedulable)
	}
	return out
}

// Snapshot is the cluster as one scheduling cycle sees it: every node, in
// name order, with what its pods request. The cycle works on the snapshot
// while the informers keep changing the scheduler's cache.
type Snapshot struct {
	Nodes []*NodeInfo
	// imageNodes counts, for each image name, the nodes that have it:
	// ImageLocality's spread.
	imageNodes map[string]int
	// replicaSets by namespace/name: whose selectors PodTopologySpread
	// spreads their pods by.
	replicaSets map[string]*appsv1.ReplicaSet
}

func replicaSetsByKey(rs []*appsv1.ReplicaSet) map[string]*appsv1.ReplicaSet {
	m := make(map[string]*appsv1.ReplicaSet, len(rs))
	for _, r := range rs {
		m[r.Namespace+"/"+r.Name] = r
	}
	return m
}

// NewSnapshot returns a snapshot of nodes (sorted here by name).
func NewSnapshot(nodes []*NodeInfo) *Snapshot {
	sorted := append([]*NodeInfo(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name() < sorted[j].Name() })
	return &Snapshot{Nodes: sorted, imageNodes: imageSpread(sorted)}
}

func imageSpread(nodes []*NodeInfo) map[string]int {
	spread := map[string]int{}
	for _, n := range nodes {
		for name := range n.Images {
			spread[name]++
		}
	}
	return spread
}

// snapshotOf builds a snapshot from nodes and the pods bound to each (by
// node name).
func snapshotOf(nodes []*corev1.Node, podsOnNodes map[string][]*corev1.Pod) *Snapshot {
	infos := make([]*NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		infos = append(infos, NewNodeInfo(n, podsOnNodes[n.Name]...))
	}
	return NewSnapshot(infos)
}
