package scheduler

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxNodeScore is the best score a score plugin gives a node.
const MaxNodeScore int64 = 100

// A ScorePlugin ranks the nodes that passed every filter. The scheduler
// multiplies each plugin's score (0-MaxNodeScore, after NormalizeScores)
// by the plugin's weight in the profile and adds them up: the node with the
// highest total wins.
type ScorePlugin interface {
	Name() string
	// Score rates one feasible node. s is the whole cluster of this cycle.
	Score(p *PodInfo, n *NodeInfo, s *Snapshot) int64
}

// A ScoreNormalizer rescales its plugin's raw scores over all feasible
// nodes to 0-MaxNodeScore (kube-scheduler's ScoreExtensions).
type ScoreNormalizer interface {
	NormalizeScores(scores []int64)
}

// A PreScorer may skip its plugin for a pod, on every node: the plugin
// then adds nothing to the totals.
type PreScorer interface {
	PreScore(p *PodInfo) (skip bool)
}

// A CycleScorer looks at the whole cluster once per cycle before it scores
// (kube-scheduler's PreScore writing its CycleState): ForCycle returns the
// plugin that scores this cycle's feasible nodes, or skip, and the plugin
// then adds nothing to the totals.
type CycleScorer interface {
	ForCycle(p *PodInfo, s *Snapshot, feasible []*NodeInfo) (scorer ScorePlugin, skip bool)
}

// Score implements ScorePlugin for NodeResourcesFit with kube-scheduler's
// default strategy, LeastAllocated, over cpu and memory (weight 1 each):
// for each, (allocatable - requested) * 100 / allocatable, counting what the
// node's pods and this pod request with the non-zero defaults; then the
// weighted mean. An emptier node scores higher: pods spread.
func (NodeResourcesFit) Score(p *PodInfo, n *NodeInfo, _ *Snapshot) int64 {
	least := func(requested, allocatable int64) int64 {
		if allocatable == 0 || requested > allocatable {
			return 0
		}
		return (allocatable - requested) * MaxNodeScore / allocatable
	}
	var score, weights int64
	for _, r := range [...]struct{ requested, allocatable int64 }{
		{n.NonZeroRequested.MilliCPU + p.NonZeroRequests.MilliCPU, n.Allocatable.MilliCPU},
		{n.NonZeroRequested.Memory + p.NonZeroRequests.Memory, n.Allocatable.Memory},
	} {
		if r.allocatable == 0 {
			continue
		}
		score += least(r.requested, r.allocatable) // weight 1
		weights++
	}
	if weights == 0 {
		return 0
	}
	return score / weights
}

// NodeResourcesBalancedAllocation prefers a node whose cpu and memory would
// be used in the same proportion after the pod lands: with f the fraction of
// each that the node's pods and this pod request (capped at 1), the score is
// (1 - |f_cpu - f_memory| / 2) * 100, one minus their standard deviation.
// A node with much free cpu but little free memory would strand its cpu.
// It skips pods that request neither (best-effort pods), which would
// otherwise pile up on the node it likes.
type NodeResourcesBalancedAllocation struct{}

// Name implements ScorePlugin.
func (NodeResourcesBalancedAllocation) Name() string { return "NodeResourcesBalancedAllocation" }

// PreScore implements PreScorer.
func (NodeResourcesBalancedAllocation) PreScore(p *PodInfo) bool {
	return p.Requests.MilliCPU == 0 && p.Requests.Memory == 0
}

// Score implements ScorePlugin.
func (NodeResourcesBalancedAllocation) Score(p *PodInfo, n *NodeInfo, _ *Snapshot) int64 {
	var fractions []float64
	var total float64
	for _, r := range [...]struct{ requested, allocatable int64 }{
		{n.Requested.MilliCPU + p.Requests.MilliCPU, n.Allocatable.MilliCPU},
		{n.Requested.Memory + p.Requests.Memory, n.Allocatable.Memory},
	} {
		if r.allocatable == 0 {
			continue
		}
		f := min(float64(r.requested)/float64(r.allocatable), 1)
		total += f
		fractions = append(fractions, f)
	}
	std := 0.0
	switch {
	case len(fractions) == 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	case len(fractions) > 2:
		mean := total / float64(len(fractions))
		var sum float64
		for _, f := range fractions {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(len(fractions)))
	}
	return int64((1 - std) * float64(MaxNodeScore))
}

// ImageLocality prefers a node that already has the pod's images
// (status.images, reported by its kubelet), so that the pod starts without
// a pull. Each image present counts its size times the share of nodes that
// have it (an image every node has gives no reason to pick this one); the
// sum is clamped to 23 MiB..1000 MiB per container and scaled to 0-100.
type ImageLocality struct{}

// The bounds of ImageLocality's scale: a reasonable range of compressed
// image sizes in registries.
const (
	mib                        int64 = 1024 * 1024
	imageMinThreshold                = 23 * mib
	imageMaxContainerThreshold       = 1000 * mib
)

// Name implements ScorePlugin.
func (ImageLocality) Name() string { return "ImageLocality" }

// Score implements ScorePlugin.
func (ImageLocality) Score(p *PodInfo, n *NodeInfo, s *Snapshot) int64 {
	total := len(s.Nodes)
	var sum int64
	containers := append(append([]corev1.Container(nil), p.Pod.Spec.InitContainers...), p.Pod.Spec.Containers...)
	for _, c := range containers {
		name := normalizedImageName(c.Image)
		if size, ok := n.Images[name]; ok && total > 0 {
			spread := float64(s.imageNodes[name]) / float64(total)
			sum += int64(float64(size) * spread)
		}
	}
	maxThreshold := imageMaxContainerThreshold * int64(len(containers))
	sum = max(sum, imageMinThreshold)
	sum = min(sum, maxThreshold)
	if maxThreshold <= imageMinThreshold {
		return 0
	}
	return MaxNodeScore * (sum - imageMinThreshold) / (maxThreshold - imageMinThreshold)
}

// normalizedImageName adds ":latest" to a name without a tag or digest, as
// kube-scheduler does before looking the image up in status.images. (Like
// kube-scheduler, it does not add the registry: "nginx" does not match a
// node that lists only docker.io/library/nginx:latest.)
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

// Score implements ScorePlugin for TaintToleration: the number of the
// node's PreferNoSchedule taints that the pod's tolerations (those with an
// empty effect or PreferNoSchedule) do not tolerate. NormalizeScores turns
// the count around: fewer is better.
func (TaintToleration) Score(p *PodInfo, n *NodeInfo, _ *Snapshot) int64 {
	var tolerations []corev1.Toleration
	for _, t := range p.Pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			tolerations = append(tolerations, t)
		}
	}
	var count int64
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !tolerated(tolerations, t) {
			count++
		}
	}
	return count
}

// NormalizeScores implements ScoreNormalizer: kube-scheduler's
// DefaultNormalizeScore, reversed. The node with the most untolerated
// PreferNoSchedule taints gets 0, a node with none 100; when no node has
// any, every node gets 100.
func (TaintToleration) NormalizeScores(scores []int64) {
	defaultNormalizeScore(scores, true)
}

func defaultNormalizeScore(scores []int64, reverse bool) {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s)
	}
	if highest == 0 {
		if reverse {
			for i := range scores {
				scores[i] = MaxNodeScore
			}
		}
		return
	}
	for i, s := range scores {
		s = MaxNodeScore * s / highest
		if reverse {
			s = MaxNodeScore - s
		}
		scores[i] = s
	}
}
