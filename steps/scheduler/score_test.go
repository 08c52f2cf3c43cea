package scheduler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeResourcesFit_Score(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		on   []*corev1.Pod
		want int64
	}{
		{"a quarter of an empty node", pod("web", "500m", "1Gi"), node("n", "2", "4Gi"), nil, 75},
		{"half the cpu, a quarter of the memory: the mean", pod("web", "1", "1Gi"), node("n", "2", "4Gi"), nil, 62},
		{"the node's pods count, with the defaults when they request nothing",
			pod("web", "500m", "1Gi"), node("n", "2", "4Gi"), []*corev1.Pod{pod("a", "", "")}, 70},
		{"a pod with no requests counts 100m and 200Mi", pod("web", "", ""), node("n", "1", "1000Mi"), nil, 85},
		{"a full node", pod("web", "2", "4Gi"), node("n", "2", "4Gi"), nil, 0},
		{"no allocatable: nothing to score", pod("web", "1", "1Gi"), node("n", "0", "0"), nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNodeInfo(tt.node, tt.on...)
			if got := (NodeResourcesFit{}).Score(NewPodInfo(tt.pod), n, NewSnapshot([]*NodeInfo{n})); got != tt.want {
				t.Errorf("Score = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNodeResourcesBalancedAllocation_Score(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		on   []*corev1.Pod
		want int64
	}{
		{"same share of cpu and memory", pod("web", "500m", "1Gi"), node("n", "2", "4Gi"), nil, 100},
		{"half the cpu, a quarter of the memory", pod("web", "1", "1Gi"), node("n", "2", "4Gi"), nil, 87},
		{"all the cpu, no memory", pod("web", "2", "0"), node("n", "2", "4Gi"), nil, 50},
		{"the node's pods count as requested (no defaults)", pod("web", "500m", "1Gi"), node("n", "2", "4Gi"),
			[]*corev1.Pod{pod("a", "1", ""), pod("b", "", "")}, 75},
		{"fractions are capped at 1", pod("web", "4", "4Gi"), node("n", "2", "4Gi"), nil, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNodeInfo(tt.node, tt.on...)
			if got := (NodeResourcesBalancedAllocation{}).Score(NewPodInfo(tt.pod), n, NewSnapshot([]*NodeInfo{n})); got != tt.want {
				t.Errorf("Score = %d, want %d", got, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		pod  *corev1.Pod
		skip bool
	}{{pod("besteffort", "", ""), true}, {pod("cpu-only", "100m", ""), false}, {pod("memory-only", "", "1Mi"), false}} {
		if got := (NodeResourcesBalancedAllocation{}).PreScore(NewPodInfo(tt.pod)); got != tt.skip {
			t.Errorf("PreScore(%s) = %v, want %v", tt.pod.Name, got, tt.skip)
		}
	}
}

func TestImageLocality_Score(t *testing.T) {
	const mb = 1024 * 1024
	with500 := func(name string) *corev1.Node {
		return node(name, "2", "4Gi", images(map[string]int64{"nginx:1.25": 500 * mb, "nginx:latest": 500 * mb}))
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node // the first is scored
		want  int64
	}{
		{"image absent", pod("web", "", ""), []*corev1.Node{node("a", "2", "4Gi"), with500("b")}, 0},
		{"on 1 node of 2: half its size counts", pod("web", "", ""), []*corev1.Node{with500("a"), node("b", "2", "4Gi")}, 23},
		{"on every node: its whole size", pod("web", "", ""), []*corev1.Node{with500("a"), with500("b")}, 48},
		{"an image under 23MB scores 0", pod("web", "", ""), []*corev1.Node{
			node("a", "2", "4Gi", images(map[string]int64{"nginx:1.25": 20 * mb}))}, 0},
		{"2000MB for one container: capped at 1000MB", pod("web", "", ""), []*corev1.Node{
			node("a", "2", "4Gi", images(map[string]int64{"nginx:1.25": 2000 * mb}))}, 100},
		{"no tag: :latest", pod("web", "", "", withImage("nginx")), []*corev1.Node{with500("a")}, 48},
		{"no registry added, as kube-scheduler", pod("web", "", "", withImage("nginx")), []*corev1.Node{
			node("a", "2", "4Gi", images(map[string]int64{"docker.io/library/nginx:latest": 500 * mb}))}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var infos []*NodeInfo
			for _, n := range tt.nodes {
				infos = append(infos, NewNodeInfo(n))
			}
			if got := (ImageLocality{}).Score(NewPodInfo(tt.pod), infos[0], NewSnapshot(infos)); got != tt.want {
				t.Errorf("Score = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTaintToleration_Score(t *testing.T) {
	nodes := []*corev1.Node{
		node("none", "2", "4Gi"),
		node("one", "2", "4Gi", tainted("spot:PreferNoSchedule")),
		node("two", "2", "4Gi", tainted("spot:PreferNoSchedule", "old=yes:PreferNoSchedule", "gpu:NoSchedule")),
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		raw  []int64
		want []int64
	}{
		{"fewer untolerated PreferNoSchedule taints is better", pod("web", "", ""), []int64{0, 1, 2}, []int64{100, 50, 0}},
		{"tolerated taints do not count", pod("web", "", "", tolerating(corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists})),
			[]int64{0, 0, 1}, []int64{100, 100, 0}},
		{"a NoSchedule toleration does not tolerate PreferNoSchedule", pod("web", "", "", tolerating(
			corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			[]int64{0, 1, 2}, []int64{100, 50, 0}},
		{"all tolerated: every node 100", pod("web", "", "", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			[]int64{0, 0, 0}, []int64{100, 100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPodInfo(tt.pod)
			var infos []*NodeInfo
			for _, n := range nodes {
				infos = append(infos, NewNodeInfo(n))
			}
			s := NewSnapshot(infos)
			var got []int64
			for _, n := range s.Nodes {
				got = append(got, TaintToleration{}.Score(p, n, s))
			}
			if !reflect.DeepEqual(got, tt.raw) {
				t.Errorf("raw scores = %v, want %v", got, tt.raw)
			}
			TaintToleration{}.NormalizeScores(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("normalized = %v, want %v", got, tt.want)
			}
		})
	}
}
