package scheduler

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSchedule_ChosenNode(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		nodes  []*corev1.Node
		on     map[string][]*corev1.Pod
		want   string
		scored bool
	}{
		{"the only node that passes every filter", pod("web", "1", "1Gi"), []*corev1.Node{
			node("node-1", "2", "4Gi", tainted("gpu=true:NoSchedule")),
			node("node-2", "500m", "4Gi"),
			node("node-3", "2", "4Gi"),
		}, nil, "node-3", false},
		{"the emptier node (LeastAllocated)", pod("web", "500m", "512Mi"), []*corev1.Node{
			node("node-1", "2", "4Gi"), node("node-2", "2", "4Gi"),
		}, map[string][]*corev1.Pod{"node-1": {pod("a", "1", "2Gi", boundTo("node-1"))}}, "node-2", true},
		{"PreferNoSchedule weighs 3", pod("web", "500m", "512Mi"), []*corev1.Node{
			node("node-1", "2", "4Gi", tainted("spot:PreferNoSchedule")), node("node-2", "2", "4Gi"),
		}, map[string][]*corev1.Pod{"node-2": {pod("a", "1", "2Gi", boundTo("node-2"))}}, "node-2", true},
		{"the image already there", pod("web", "100m", "128Mi"), []*corev1.Node{
			node("node-1", "2", "4Gi"),
			node("node-2", "2", "4Gi", images(map[string]int64{"nginx:1.25": 800 << 20})),
		}, nil, "node-2", true},
		{"nodeSelector", pod("web", "", "", selecting("disk", "ssd")), []*corev1.Node{
			node("node-1", "2", "4Gi"), node("node-2", "2", "4Gi", labeled("disk", "ssd")), node("node-3", "2", "4Gi"),
		}, nil, "node-2", false},
		{"a Ready node, not the one whose kubelet never reported", pod("web", "", ""), []*corev1.Node{
			node("node-1", "8", "16Gi", ready(corev1.ConditionUnknown)), node("node-2", "1", "1Gi"),
		}, nil, "node-2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Schedule(tt.pod, tt.nodes, tt.on)
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			if r.Node != tt.want || r.Scored != tt.scored {
				var b bytes.Buffer
				r.WriteTable(&b)
				t.Errorf("chose %q (scored %v), want %q (scored %v)\n%s", r.Node, r.Scored, tt.want, tt.scored, b.String())
			}
		})
	}
}

func TestSchedule_TieBreakSpread(t *testing.T) {
	nodes := []*corev1.Node{node("node-1", "2", "4Gi"), node("node-2", "2", "4Gi"), node("node-3", "2", "4Gi")}
	const runs = 3000
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	for range runs {
		r, err := Schedule(pod("web", "100m", "128Mi"), nodes, nil, WithRand(rng))
		if err != nil {
			t.Fatal(err)
		}
		if r.Ties != 3 {
			t.Fatalf("Ties = %d over 3 identical nodes, want 3", r.Ties)
		}
		counts[r.Node]++
	}
	for _, n := range nodes {
		// Each node's share is 1/3: 1000 of 3000, within a loose bound.
		if c := counts[n.Name]; c < 800 || c > 1200 {
			t.Errorf("%s chosen %d times of %d, want about %d: %v", n.Name, c, runs, runs/3, counts)
		}
	}
}

func TestSchedule_Unschedulable(t *testing.T) {
	gpu := func(name string) *corev1.Node { return node(name, "8", "16Gi", tainted("gpu=true:NoSchedule")) }
	many := func(n int, mk func(string) *corev1.Node) []*corev1.Node {
		var out []*corev1.Node
		for i := range n {
			out = append(out, mk(fmt.Sprintf("node-%02d", i)))
		}
		return out
	}
	small := func(name string) *corev1.Node { return node(name, "1", "1Gi") }
	tests := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
		want  string
	}{
		{"the issue's example", pod("web", "2", "1Gi"), []*corev1.Node{node("node-1", "1", "4Gi"), gpu("node-2"), gpu("node-3")},
			"0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {gpu: true}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
		{"sorted as text, count included", pod("web", "2", "1Gi"), append(many(10, small), gpu("gpu-1"), gpu("gpu-2")),
			"0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {gpu: true}. preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling."},
		{"a node gives all its filter's reasons", pod("web", "2", "2Gi"), []*corev1.Node{small("node-1"), node("node-2", "1", "8Gi")},
			"0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."},
		{"only the first failing filter counts", pod("web", "2", "2Gi"), []*corev1.Node{node("node-1", "1", "1Gi", cordoned)},
			"0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{"a node whose kubelet never reported", pod("web", "", ""), []*corev1.Node{node("node-1", "2", "4Gi", ready(corev1.ConditionUnknown))},
			"0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{"affinity and too many pods", pod("web", "", "", selecting("disk", "ssd")), []*corev1.Node{
			node("node-1", "2", "4Gi"), node("node-2", "2", "4Gi", labeled("disk", "ssd"), maxPods("0"))},
			"0/2 nodes are available: 1 Too many pods, 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."},
		// kube-scheduler v1.37's own text for a nodeSelector no node has
		{"the issue's FailedScheduling", pod("web", "", "", selecting("disk", "ssd")), []*corev1.Node{node("node-1", "2", "4Gi")},
			"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{"preemptionPolicy Never", pod("web", "", "", selecting("disk", "ssd"), func(p *corev1.Pod) { p.Spec.PreemptionPolicy = new(corev1.PreemptNever) }), []*corev1.Node{node("node-1", "2", "4Gi")},
			"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: not eligible due to preemptionPolicy=Never."},
		{"no nodes at all", pod("web", "", ""), nil, "no nodes available to schedule pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Schedule(tt.pod, tt.nodes, nil)
			if err == nil {
				t.Fatalf("Schedule chose %q, want it unschedulable", r.Node)
			}
			if err.Error() != tt.want {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tt.want)
			}
			var fit *FitError
			if !errors.As(err, &fit) && !errors.Is(err, ErrNoNodesAvailable) {
				t.Errorf("error %T is neither a *FitError nor ErrNoNodesAvailable", err)
			}
			if r.Node != "" || r.Feasible != 0 {
				t.Errorf("Result chose %q with %d feasible", r.Node, r.Feasible)
			}
		})
	}
}

func TestResult_WriteTable(t *testing.T) {
	nodes := []*corev1.Node{
		node("node-1", "2", "4Gi", tainted("gpu=true:NoSchedule")),
		node("node-2", "2", "4Gi"),
		node("node-3", "2", "4Gi"),
		node("node-4", "2", "4Gi", ready(corev1.ConditionFalse)),
	}
	r, err := Schedule(pod("web", "500m", "1Gi"), nodes, nil, WithRand(rand.New(rand.NewPCG(1, 1))))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, want := range []string{
		"NODE", "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
		"NodeResourcesFit x1", "NodeResourcesBalancedAllocation x1", "ImageLocality x1", "TaintToleration x3", "PodTopologySpread x2", "TOTAL",
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header lacks %q: %s", want, lines[0])
		}
	}
	// node-1: two filters passed, the taint failed, the rest did not run.
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "node-1 ok ok node(s) had untolerated taint {gpu: true} - - - | - - - - - | -" {
		t.Errorf("node-1's row: %q", got)
	}
	// node-2: every filter ok; taints 100x3, LeastAllocated 75, spreading
	// skipped (nothing selects the pod), balanced 100, image 0: 475.
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "node-2 ok ok ok ok ok ok | 100 75 skip 100 0 | 475" {
		t.Errorf("node-2's row: %q", got)
	}
	if !strings.Contains(out, "node-4: its Ready condition is False, so it counts as tainted node.kubernetes.io/not-ready:NoSchedule") {
		t.Errorf("no line about node-4's implied taint:\n%s", out)
	}
	if r.Ties != 2 || (r.Node != "node-2" && r.Node != "node-3") {
		t.Errorf("chose %s among %d", r.Node, r.Ties)
	}
}

// TestPreemption: DefaultPreemption's message, by what the nodes run.
func TestPreemption(t *testing.T) {
	prio := func(v int32) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.Priority = &v } }
	full := node("node-1", "2", "4Gi")
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		running   []*corev1.Pod
		mightHelp bool
		want      string
	}{
		{"cannot help", pod("web", "1", ""), nil, false, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{"no pod of lower priority", pod("web", "1", ""), []*corev1.Pod{pod("old", "2", "", boundTo("node-1"))}, true,
			"preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		{"a pod of lower priority: kube-scheduler would preempt, podlab says nothing", pod("web", "1", "", prio(1000)),
			[]*corev1.Pod{pod("old", "2", "", boundTo("node-1"))}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNodeInfo(full, tc.running...)
			if got := Preemption(NewPodInfo(tc.pod), []*NodeInfo{n}, []bool{tc.mightHelp}); got != tc.want {
				t.Errorf("Preemption = %q, want %q", got, tc.want)
			}
		})
	}
}
