package scheduler

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodTopologySpread, as kube-scheduler configures it by default, spreads
// the pods of one owner over the nodes and the zones: its system default
// constraints, both ScheduleAnyway (a preference, never a filter),
//
//	kubernetes.io/hostname       maxSkew 3
//	topology.kubernetes.io/zone  maxSkew 5
//
// apply to every pod that states no spec.topologySpreadConstraints of its
// own and that something selects: the selector of its controlling
// ReplicaSet (kube-scheduler also merges the Services, ReplicationControllers
// and StatefulSets that select it; podlab has none of those). A pod nothing
// selects is skipped.
//
// For each constraint, a node's raw score is the number of matching pods
// (same namespace, not being deleted) in its domain (the node itself for
// the hostname, every node with the same zone label for the zone), times
// log(domains + 2), plus maxSkew - 1; constraints whose label the node
// lacks add nothing. NormalizeScores turns the sums around, as kube does:
// 100 * (max + min - score) / max, so the node with the fewest matching
// pods gets 100. A Deployment's replicas then land on different nodes even
// where NodeResourcesFit, which sees only requests, would pile them up.
//
// podlab implements only the system defaults: a pod's own
// spec.topologySpreadConstraints are not honored (the plugin skips it).
type PodTopologySpread struct{}

// The system default constraints of kube-scheduler's PodTopologySpread.
var systemDefaultConstraints = [...]struct {
	key     string
	maxSkew int32
}{
	{corev1.LabelHostname, 3},
	{corev1.LabelTopologyZone, 5},
}

// Name implements ScorePlugin.
func (PodTopologySpread) Name() string { return "PodTopologySpread" }

// Score implements ScorePlugin; it is never called on the plugin itself,
// only on what ForCycle returns.
func (PodTopologySpread) Score(*PodInfo, *NodeInfo, *Snapshot) int64 { return 0 }

// ForCycle implements CycleScorer: kube-scheduler's PreScore. It builds the
// pod's default constraints and counts the matching pods of each zone over
// every node (not only the feasible ones) whose labels match the pod's
// required node affinity (the default nodeAffinityPolicy, Honor).
func (PodTopologySpread) ForCycle(p *PodInfo, s *Snapshot, feasible []*NodeInfo) (ScorePlugin, bool) {
	if len(p.Pod.Spec.TopologySpreadConstraints) > 0 || len(s.Nodes) == 0 {
		return nil, true
	}
	selector := defaultSelector(p.Pod, s.replicaSets)
	if selector.Empty() {
		return nil, true
	}
	c := &spreadCycle{namespace: p.Pod.Namespace, selector: selector}
	for i, dc := range systemDefaultConstraints {
		c.counts[i] = map[string]int64{}
		size := 0
		for _, n := range feasible {
			if dc.key == corev1.LabelHostname {
				size++
				continue
			}
			value := n.Node.Labels[dc.key]
			if _, ok := c.counts[i][value]; !ok {
				c.counts[i][value] = 0
				size++
			}
		}
		c.weights[i] = math.Log(float64(size + 2))
	}
	for _, n := range s.Nodes {
		if !p.affinity.matches(n.Node) {
			continue
		}
		for i, dc := range systemDefaultConstraints {
			if dc.key == corev1.LabelHostname {
				continue // counted per node in Score
			}
			value := n.Node.Labels[dc.key]
			if _, ok := c.counts[i][value]; ok {
				c.counts[i][value] += c.matching(n)
			}
		}
	}
	return c, false
}

// spreadCycle is PodTopologySpread's state for one pod's cycle.
type spreadCycle struct {
	namespace string
	selector  labels.Selector
	counts    [len(systemDefaultConstraints)]map[string]int64 // zone value -> matching pods
	weights   [len(systemDefaultConstraints)]float64
}

func (c *spreadCycle) Name() string { return PodTopologySpread{}.Name() }

// matching counts n's pods that the selector matches, in the pod's
// namespace, not being deleted.
func (c *spreadCycle) matching(n *NodeInfo) int64 {
	var count int64
	for _, m := range n.pods {
		if !m.deleting && m.namespace == c.namespace && c.selector.Matches(labels.Set(m.labels)) {
			count++
		}
	}
	return count
}

// Score implements ScorePlugin: the weighted count of matching pods in the
// node's domains (lower is better; NormalizeScores turns it around).
func (c *spreadCycle) Score(_ *PodInfo, n *NodeInfo, _ *Snapshot) int64 {
	var score float64
	for i, dc := range systemDefaultConstraints {
		value, ok := n.Node.Labels[dc.key]
		if !ok {
			continue
		}
		var count int64
		if dc.key == corev1.LabelHostname {
			count = c.matching(n)
		} else {
			count = c.counts[i][value]
		}
		score += float64(count)*c.weights[i] + float64(dc.maxSkew-1)
	}
	return int64(math.Round(score))
}

// NormalizeScores implements ScoreNormalizer: kube's
// 100 * (max + min - score) / max, and 100 for every node when max is 0.
func (c *spreadCycle) NormalizeScores(scores []int64) {
	var lo int64 = math.MaxInt64
	var hi int64
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	for i, s := range scores {
		if hi == 0 {
			scores[i] = MaxNodeScore
			continue
		}
		scores[i] = MaxNodeScore * (hi + lo - s) / hi
	}
}

// defaultSelector is kube-scheduler's helper.DefaultSelector, for the
// owners podlab has: the requirements of the selector of the ReplicaSet
// that controls pod (replicaSets by namespace/name). Empty when nothing
// selects the pod.
func defaultSelector(pod *corev1.Pod, replicaSets map[string]*appsv1.ReplicaSet) labels.Selector {
	selector := labels.NewSelector()
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return selector
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil || gv.WithKind(owner.Kind) != appsv1.SchemeGroupVersion.WithKind("ReplicaSet") {
		return selector
	}
	rs := replicaSets[pod.Namespace+"/"+owner.Name]
	if rs == nil {
		return selector
	}
	other, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return selector
	}
	if r, ok := other.Requirements(); ok {
		selector = selector.Add(r...)
	}
	return selector
}
