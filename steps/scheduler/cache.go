package scheduler

import (
	"reflect"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// cache is the scheduler's view of the cluster, fed by its informers: the
// nodes, and what the pods on each request. A pod the scheduler has chosen
// a node for is "assumed" on that node at once, before its binding is
// written, so that the next cycle counts it (kube-scheduler's assume); the
// informer confirms it when the binding comes back in the watch, or the
// binding fails and the scheduler forgets it.
type cache struct {
	mu    sync.Mutex
	nodes map[string]*NodeInfo // by node name; Node is nil for a node we know only from its pods
	pods  map[string]cachedPod // by namespace/name

	names      []string // nodes with a Node object, sorted; nil: rebuild
	imageNodes map[string]int

	replicaSets map[string]*appsv1.ReplicaSet // by namespace/name
	rsSnapshot  map[string]*appsv1.ReplicaSet // a copy for snapshots; nil: rebuild
}

type cachedPod struct {
	meta    podMeta
	uid     string
	node    string
	req     Resources
	nonZero Resources
	assumed bool
}

func newCache() *cache {
	return &cache{nodes: map[string]*NodeInfo{}, pods: map[string]cachedPod{}, replicaSets: map[string]*appsv1.ReplicaSet{}}
}

// setNode adds or replaces a node. It reports whether the change may make
// a pod schedulable (a new node; allocatable, labels, taints,
// unschedulable or conditions changed), as kube-scheduler decides which
// node updates move unschedulable pods.
func (c *cache) setNode(node *corev1.Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node.Name]
	if n == nil {
		n = &NodeInfo{}
		c.nodes[node.Name] = n
	}
	old := n.Node
	n.setNode(node)
	c.names = nil
	return old == nil || schedulingPropertiesChanged(old, node)
}

func schedulingPropertiesChanged(old, new *corev1.Node) bool {
	conditions := func(n *corev1.Node) map[corev1.NodeConditionType]corev1.ConditionStatus {
		m := map[corev1.NodeConditionType]corev1.ConditionStatus{}
		for _, c := range n.Status.Conditions {
			m[c.Type] = c.Status
		}
		return m
	}
	return old.Spec.Unschedulable != new.Spec.Unschedulable ||
		!reflect.DeepEqual(old.Status.Allocatable, new.Status.Allocatable) ||
		!reflect.DeepEqual(old.Labels, new.Labels) ||
		!reflect.DeepEqual(old.Spec.Taints, new.Spec.Taints) ||
		!reflect.DeepEqual(conditions(old), conditions(new))
}

// setReplicaSet adds, replaces or (deleted) removes a ReplicaSet, whose
// selector PodTopologySpread spreads its pods by.
func (c *cache) setReplicaSet(rs *appsv1.ReplicaSet, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := rs.Namespace + "/" + rs.Name
	if deleted {
		delete(c.replicaSets, key)
	} else {
		c.replicaSets[key] = rs
	}
	c.rsSnapshot = nil
}

// removeNode forgets a deleted node (its pods still count, should it come
// back).
func (c *cache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil {
		return
	}
	if n.Pods == 0 {
		delete(c.nodes, name)
	} else {
		n.Node = nil
	}
	c.names = nil
}

// addPod counts a bound pod on its node (and confirms it, if it was
// assumed).
func (c *cache) addPod(key string, pod *corev1.Pod) {
	c.put(key, cachedPod{meta: podMetaOf(pod), uid: string(pod.UID), node: pod.Spec.NodeName, req: PodRequests(pod, false), nonZero: PodRequests(pod, true)})
}

// assume counts p on node before its binding is written.
func (c *cache) assume(p *PodInfo, node string) {
	c.put(p.Key(), cachedPod{meta: podMetaOf(p.Pod), uid: string(p.Pod.UID), node: node, req: p.Requests, nonZero: p.NonZeroRequests, assumed: true})
}

func (c *cache) put(key string, p cachedPod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
	c.pods[key] = p
	n := c.nodes[p.node]
	if n == nil {
		n = &NodeInfo{}
		c.nodes[p.node] = n
	}
	n.addPod(p.meta, p.req, p.nonZero)
}

// forget undoes assume, unless the informer has confirmed the pod since.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[key]; ok && p.assumed {
		c.removeLocked(key)
	}
}

// isAssumed reports whether key is assumed on a node and not confirmed yet.
func (c *cache) isAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[key].assumed
}

// removePod stops counting a pod (deleted or finished). It reports whether
// it was counted: its node has room again.
func (c *cache) removePod(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removeLocked(key)
}

func (c *cache) removeLocked(key string) bool {
	p, ok := c.pods[key]
	if !ok {
		return false
	}
	delete(c.pods, key)
	if n := c.nodes[p.node]; n != nil {
		n.removePod(key, p.req, p.nonZero)
		if n.Node == nil && n.Pods == 0 {
			delete(c.nodes, p.node)
		}
	}
	return true
}

// snapshot copies the nodes for one cycle.
func (c *cache) snapshot() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = make([]string, 0, len(c.nodes))
		infos := make([]*NodeInfo, 0, len(c.nodes))
		for name, n := range c.nodes {
			if n.Node != nil {
				c.names = append(c.names, name)
				infos = append(infos, n)
			}
		}
		sort.Strings(c.names)
		c.imageNodes = imageSpread(infos)
	}
	if c.rsSnapshot == nil {
		c.rsSnapshot = make(map[string]*appsv1.ReplicaSet, len(c.replicaSets))
		for k, rs := range c.replicaSets {
			c.rsSnapshot[k] = rs
		}
	}
	s := &Snapshot{Nodes: make([]*NodeInfo, len(c.names)), imageNodes: c.imageNodes, replicaSets: c.rsSnapshot}
	for i, name := range c.names {
		s.Nodes[i] = c.nodes[name].clone()
	}
	return s
}
