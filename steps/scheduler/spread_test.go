package scheduler

import (
	"context"
	"math/rand/v2"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// replicaSet is a ReplicaSet in default selecting app=name, as a
// Deployment's ReplicaSet does (with its pod-template-hash).
func replicaSet(name string) *appsv1.ReplicaSet {
	sel := map[string]string{"app": name, "pod-template-hash": "5d4f"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-5d4f", Namespace: "default", UID: types.UID("uid-rs-" + name)},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ref(int32(6)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
			},
		},
	}
}

// ownedBy labels a pod as rs's template does and makes rs its controller.
func ownedBy(rs *appsv1.ReplicaSet) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = rs.Spec.Selector.MatchLabels
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
}

// threeNodes are three equal nodes; node-a alone has the pods' image (as
// after a first pull), which ImageLocality likes more than
// NodeResourcesFit minds a few more pods on it.
func threeNodes() []*corev1.Node {
	return []*corev1.Node{
		node("node-a", "4", "8Gi", images(map[string]int64{"nginx:1.25": 1000 * mib})),
		node("node-b", "4", "8Gi"),
		node("node-c", "4", "8Gi"),
	}
}

func withoutSpread() Profile {
	p := DefaultProfile()
	var scores []WeightedScore
	for _, s := range p.Scores {
		if s.Plugin.Name() != "PodTopologySpread" {
			scores = append(scores, s)
		}
	}
	p.Scores = scores
	return p
}

// A Deployment's 6 pods over 3 equal nodes: 2, 2 and 2 with kube's default
// spreading; without it, all 6 pile up on the node that has the image.
func TestSchedule_DeploymentSpreads(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want map[string]int
	}{
		{"default profile", nil, map[string]int{"node-a": 2, "node-b": 2, "node-c": 2}},
		{"without PodTopologySpread", []Option{WithProfile(withoutSpread())}, map[string]int{"node-a": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := replicaSet("web")
			nodes := threeNodes()
			on := map[string][]*corev1.Pod{}
			got := map[string]int{}
			for i := range 6 {
				p := pod("web-"+string(rune('a'+i)), "", "", ownedBy(rs))
				opts := append([]Option{WithReplicaSets(rs), WithRand(rand.New(rand.NewPCG(1, 2)))}, tt.opts...)
				r, err := Schedule(p, nodes, on, opts...)
				if err != nil {
					t.Fatalf("scheduling %s: %v", p.Name, err)
				}
				p.Spec.NodeName = r.Node
				on[r.Node] = append(on[r.Node], p)
				got[r.Node]++
			}
			if len(got) != len(tt.want) {
				t.Fatalf("pods per node %v, want %v", got, tt.want)
			}
			for n, c := range tt.want {
				if got[n] != c {
					t.Fatalf("pods per node %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// The running scheduler knows the ReplicaSets from its informer: the pods
// of a ReplicaSet created through the API server spread too.
func TestScheduler_OnceSpreadsReplicaSet(t *testing.T) {
	c := newCluster(t)
	rs := replicaSet("web")
	for _, n := range threeNodes() {
		c.create(t, n)
	}
	c.create(t, rs)
	created, err := c.admin.Get(context.Background(), "replicasets", "default", rs.Name)
	if err != nil {
		t.Fatal(err)
	}
	rs = created.(*appsv1.ReplicaSet)
	names := []string{"web-1", "web-2", "web-3", "web-4", "web-5", "web-6"}
	for _, name := range names {
		c.create(t, pod(name, "", "", ownedBy(rs)))
	}
	if _, err := New(c.sched).Once(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for _, name := range names {
		on[c.pod(t, name).Spec.NodeName]++
	}
	if on["node-a"] != 2 || on["node-b"] != 2 || on["node-c"] != 2 {
		t.Errorf("pods per node: %v, want 2 on each", on)
	}
}

// Scores by hand: hostname weight log(3+2), zone weight log(zones+2),
// raw = count*weight + maxSkew-1 per label the node has, then
// 100*(max+min-raw)/max.
func TestPodTopologySpread_Score(t *testing.T) {
	rs := replicaSet("web")
	web := func(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
		return pod(name, "", "", append([]func(*corev1.Pod){ownedBy(rs)}, opts...)...)
	}
	other := func(p *corev1.Pod) { p.Namespace = "other" }
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	tests := []struct {
		name   string
		nodes  []*corev1.Node
		pods   map[string][]*corev1.Pod
		newPod []func(*corev1.Pod)
		want   []int64 // per feasible node
	}{
		{"no pods yet: all equal", threeNodes(), nil, nil, []int64{100, 100, 100}},
		// raw 2, 1.609+2=4, 3*1.609+2=7: 100*7/7, 100*5/7, 100*2/7.
		{"0, 1 and 3 pods", threeNodes(), map[string][]*corev1.Pod{
			"node-b": {web("w1")}, "node-c": {web("w2"), web("w3"), web("w4")},
		}, nil, []int64{100, 71, 28}},
		{"other namespaces, deleting pods and other labels do not count", threeNodes(), map[string][]*corev1.Pod{
			"node-b": {web("w1", other), web("w2", deleting), pod("x", "", "")},
		}, nil, []int64{100, 100, 100}},
		// zone weight log(2+2)=1.386, hostname log(5)=1.609. a (z1, 1 pod):
		// 1.609+2 + 1*1.386+4 = 8.99 -> 9; b (z1, 0): 2 + 1.386+4 = 7.39 -> 7;
		// c (z2, 0): 2 + 4 = 6. 100*(15-9)/9, 100*(15-7)/9, 100*(15-6)/9.
		{"zones", []*corev1.Node{
			node("node-a", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z1")),
			node("node-b", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z1")),
			node("node-c", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z2")),
		}, map[string][]*corev1.Pod{"node-a": {web("w1")}}, nil, []int64{66, 88, 100}},
		// The pod asks for disk=ssd: node-b is not feasible, and its pods
		// do not count for zone z1 either (nodeAffinityPolicy Honor). Both
		// feasible nodes: 0 pods, raw 2 + 4, all 100 (counting node-b's
		// two pods in z1 would give node-a 66).
		{"pods on nodes the pod's nodeSelector excludes do not count", []*corev1.Node{
			node("node-a", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z1", "disk", "ssd")),
			node("node-b", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z1")),
			node("node-c", "4", "8Gi", labeled(corev1.LabelTopologyZone, "z2", "disk", "ssd")),
		}, map[string][]*corev1.Pod{"node-b": {web("w1"), web("w2")}}, []func(*corev1.Pod){selecting("disk", "ssd")}, []int64{100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.nodes, tt.pods)
			s.replicaSets = replicaSetsByKey([]*appsv1.ReplicaSet{rs})
			p := NewPodInfo(web("new", tt.newPod...))
			var feasible []*NodeInfo
			for _, n := range s.Nodes {
				if p.affinity.matches(n.Node) {
					feasible = append(feasible, n)
				}
			}
			plugin, skip := PodTopologySpread{}.ForCycle(p, s, feasible)
			if skip {
				t.Fatal("skipped")
			}
			scores := make([]int64, len(feasible))
			for i, n := range feasible {
				scores[i] = plugin.Score(p, n, s)
			}
			plugin.(ScoreNormalizer).NormalizeScores(scores)
			for i := range tt.want {
				if len(scores) != len(tt.want) || scores[i] != tt.want[i] {
					t.Fatalf("scores %v, want %v", scores, tt.want)
				}
			}
		})
	}
}

// Pods nothing selects are skipped, as kube-scheduler skips them.
func TestPodTopologySpread_Skips(t *testing.T) {
	rs := replicaSet("web")
	tests := []struct {
		name string
		pod  *corev1.Pod
		rs   []*appsv1.ReplicaSet
	}{
		{"no owner", pod("bare", "", ""), []*appsv1.ReplicaSet{rs}},
		{"owner not a ReplicaSet", pod("job", "", "", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u", Controller: ref(true)}}
		}), []*appsv1.ReplicaSet{rs}},
		{"ReplicaSet unknown", pod("orphan", "", "", ownedBy(rs)), nil},
		{"own constraints", pod("own", "", "", ownedBy(rs), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway}}
		}), []*appsv1.ReplicaSet{rs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(threeNodes(), nil)
			s.replicaSets = replicaSetsByKey(tt.rs)
			if _, skip := (PodTopologySpread{}).ForCycle(NewPodInfo(tt.pod), s, s.Nodes); !skip {
				t.Error("not skipped")
			}
		})
	}
}
