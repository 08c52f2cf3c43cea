package scheduler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// SchedulerName is the name pods ask for in spec.schedulerName (the API
// server's defaulting sets it); pods asking for another scheduler are left
// to it.
const SchedulerName = corev1.DefaultSchedulerName

// ErrNoNodesAvailable is the scheduling failure when the cluster has no
// nodes at all (kube-scheduler's message, word for word).
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// FitError says why no node could take a pod: for each reason, how many
// nodes gave it. Each node counts the reasons of its first failing filter
// only, since the filters stop there.
type FitError struct {
	Pod         string // namespace/name
	NumAllNodes int
	Reasons     map[string]int
	// PostFilter is what kube-scheduler's PostFilter plugin, DefaultPreemption,
	// says of the pod (see Preemption): "preemption: 0/3 nodes are available:
	// ...". Empty when it would find a node to preempt on: podlab does not
	// preempt, and does not pretend to have tried.
	PostFilter string
}

// Error is kube-scheduler's message, as it appears in the FailedScheduling
// event and the PodScheduled condition:
//
//	0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {gpu: true}.
//
// "count reason" strings are sorted as text, as kube-scheduler sorts them.
// kube-scheduler then appends what its PostFilter plugin said:
//
//	0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.
func (f *FitError) Error() string {
	msg := nodesAvailable(f.NumAllNodes, f.Reasons)
	if f.PostFilter != "" {
		msg += " " + f.PostFilter
	}
	return msg
}

// nodesAvailable is kube-scheduler's FitError sentence: "0/N nodes are
// available:", then "count reason" for each reason, sorted as text.
func nodesAvailable(all int, reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for reason, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available:", all)
	if len(parts) > 0 {
		msg += " " + strings.Join(parts, ", ") + "."
	}
	return msg
}

// Reasons of kube-scheduler's DefaultPreemption, word for word.
const (
	reasonPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	reasonNoPreemptionVictims  = "No preemption victims found for incoming pod"
)

// Preemption is the message of kube-scheduler's PostFilter plugin,
// DefaultPreemption, for a pod that no node passed the filters for; failed
// holds, for each node, whether preemption might help there (the node
// failed a filter that removing pods can cure: NodeResourcesFit when the
// pod fits the node's allocatable at all, NodePorts). A pod with
// preemptionPolicy Never is not eligible. Otherwise every node where it
// cannot help counts as "Preemption is not helpful for scheduling", and a
// node where it might help but that runs no pod of lower priority than
// the pod (no victims) as "No preemption victims found for incoming pod".
// When some node has lower-priority pods, kube-scheduler would try to
// preempt them; podlab does not preempt, and Preemption returns "".
func Preemption(p *PodInfo, nodes []*NodeInfo, mightHelp []bool) string {
	if pp := p.Pod.Spec.PreemptionPolicy; pp != nil && *pp == corev1.PreemptNever {
		return "preemption: not eligible due to preemptionPolicy=Never."
	}
	prio := podPriority(p.Pod)
	reasons := map[string]int{}
	for i, n := range nodes {
		if !mightHelp[i] {
			reasons[reasonPreemptionNotHelpful]++
			continue
		}
		for _, m := range n.pods {
			if m.priority < prio {
				return "" // kube-scheduler would dry-run preempting m
			}
		}
		reasons[reasonNoPreemptionVictims]++
	}
	return "preemption: " + nodesAvailable(len(nodes), reasons)
}

// preemptionMightHelp says whether removing pods from n could let p pass
// the filter f that failed: kube-scheduler's Unschedulable, as opposed to
// UnschedulableAndUnresolvable.
func preemptionMightHelp(f FilterPlugin, p *PodInfo, n *NodeInfo) bool {
	switch f.(type) {
	case NodePorts:
		return true
	case NodeResourcesFit:
		// a request larger than the node's allocatable cannot fit however
		// many pods go
		req, alloc := p.Requests, n.Allocatable
		if req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory || req.EphemeralStorage > alloc.EphemeralStorage {
			return false
		}
		for name, q := range req.Scalar {
			if q > alloc.Scalar[name] {
				return false
			}
		}
		return true
	}
	return false
}

// WeightedScore is a score plugin with its weight in a profile.
type WeightedScore struct {
	Plugin ScorePlugin
	Weight int64
}

// Profile is the plugins a scheduling cycle runs, in order: kube-scheduler's
// KubeSchedulerProfile, cut down to what podlab implements.
type Profile struct {
	Filters []FilterPlugin
	Scores  []WeightedScore
}

// DefaultProfile is kube-scheduler's default profile, for the plugins podlab
// has: in kube-scheduler's order, the score plugins with their default
// weights.
func DefaultProfile() Profile {
	return Profile{
		Filters: []FilterPlugin{
			NodeUnschedulable{},
			NodeName{},
			TaintToleration{},
			NodeAffinity{},
			NodePorts{},
			NodeResourcesFit{},
		},
		Scores: []WeightedScore{
			{TaintToleration{}, 3},
			{NodeResourcesFit{}, 1},
			{PodTopologySpread{}, 2},
			{NodeResourcesBalancedAllocation{}, 1},
			{ImageLocality{}, 1},
		},
	}
}

// Result is one scheduling cycle of one pod: the table of nodes by plugins,
// and the node chosen.
type Result struct {
	Pod string // namespace/name
	// Requests are the pod's requests (PodRequests); ScoringRequests with
	// the defaults the scores count for containers that state none.
	Requests        Resources
	ScoringRequests Resources
	Filters         []string      // the filter plugins' names, in the order they ran
	Scores          []ScoreColumn // the score plugins, in order
	Nodes           []NodeResult  // one per node, by name
	// Feasible is how many nodes passed every filter.
	Feasible int
	// Scored is false when the cycle did not score: with one feasible node
	// (or none), kube-scheduler skips scoring.
	Scored bool
	// Node is the node chosen, "" when the pod is unschedulable.
	Node string
	// Ties is how many nodes had the best total (Node was drawn among them
	// at random).
	Ties int
}

// ScoreColumn is one score plugin of a Result.
type ScoreColumn struct {
	Name   string
	Weight int64
	// Skipped: the plugin's PreScore (or ForCycle) skipped it for this
	// pod; its scores are 0.
	Skipped bool
}

// NodeResult is one node's row of the table.
type NodeResult struct {
	Name string
	// Filters holds, per filter plugin, its reasons (nil: passed).
	// FiltersRun is how many ran: those after the first failure did not.
	Filters    [][]string
	FiltersRun int
	Feasible   bool
	// Scores holds, per score plugin, its normalized score before the
	// weight (nil when the node was filtered out or the cycle did not
	// score); Total the weighted sum.
	Scores []int64
	Total  int64
	// ImpliedTaints are the taints assumed from the node's conditions (see
	// ImpliedTaints).
	ImpliedTaints []corev1.Taint
}

// Option configures Schedule and New.
type Option func(*options)

type options struct {
	rand    *rand.Rand
	profile *Profile
	report  func(Decision)
	rs      []*appsv1.ReplicaSet
	warn    func(error)
	backoff [2]time.Duration
}

// WithRand sets the random source that breaks ties between nodes with the
// same best total (default: seeded from the system's randomness).
func WithRand(r *rand.Rand) Option { return func(o *options) { o.rand = r } }

// WithReplicaSets gives Schedule the ReplicaSets whose selectors
// PodTopologySpread spreads their pods by (the running Scheduler watches
// them instead).
func WithReplicaSets(rs ...*appsv1.ReplicaSet) Option {
	return func(o *options) { o.rs = append(o.rs, rs...) }
}

// WithProfile replaces DefaultProfile.
func WithProfile(p Profile) Option { return func(o *options) { o.profile = &p } }

func buildOptions(opts []Option) options {
	o := options{backoff: [2]time.Duration{PodInitialBackoff, PodMaxBackoff}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.rand == nil {
		o.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.profile == nil {
		p := DefaultProfile()
		o.profile = &p
	}
	return o
}

// Schedule runs one scheduling cycle for pod over nodes, where podsOnNodes
// are the pods already bound to each node (by node name): the filters, then
// the scores of the nodes that passed, then the choice. It writes nothing
// anywhere. The error is a *FitError (or ErrNoNodesAvailable) when no node
// can take the pod; the Result has the table either way.
func Schedule(pod *corev1.Pod, nodes []*corev1.Node, podsOnNodes map[string][]*corev1.Pod, opts ...Option) (Result, error) {
	o := buildOptions(opts)
	s := snapshotOf(nodes, podsOnNodes)
	s.replicaSets = replicaSetsByKey(o.rs)
	return o.profile.Schedule(NewPodInfo(pod), s, o.rand)
}

// Schedule runs the profile's cycle for p on the snapshot s, breaking ties
// with rng.
func (pr Profile) Schedule(p *PodInfo, s *Snapshot, rng *rand.Rand) (Result, error) {
	r := Result{Pod: p.Key(), Requests: p.Requests, ScoringRequests: p.NonZeroRequests, Nodes: make([]NodeResult, len(s.Nodes))}
	for _, f := range pr.Filters {
		r.Filters = append(r.Filters, f.Name())
	}
	for _, sc := range pr.Scores {
		col := ScoreColumn{Name: sc.Plugin.Name(), Weight: sc.Weight}
		if ps, ok := sc.Plugin.(PreScorer); ok {
			col.Skipped = ps.PreScore(p)
		}
		r.Scores = append(r.Scores, col)
	}
	if len(s.Nodes) == 0 {
		return r, ErrNoNodesAvailable
	}

	// Filter: every node, every filter until one fails.
	fit := &FitError{Pod: r.Pod, NumAllNodes: len(s.Nodes), Reasons: map[string]int{}}
	mightHelp := make([]bool, len(s.Nodes))
	var feasible []int
	for i, n := range s.Nodes {
		row := NodeResult{Name: n.Name(), Filters: make([][]string, len(pr.Filters)), ImpliedTaints: n.ImpliedTaints}
		row.Feasible = true
		for j, f := range pr.Filters {
			row.FiltersRun = j + 1
			if reasons := f.Filter(p, n); len(reasons) > 0 {
				row.Filters[j] = reasons
				row.Feasible = false
				for _, reason := range reasons {
					fit.Reasons[reason]++
				}
				mightHelp[i] = preemptionMightHelp(f, p, n)
				break
			}
		}
		if row.Feasible {
			feasible = append(feasible, i)
		}
		r.Nodes[i] = row
	}
	r.Feasible = len(feasible)
	switch len(feasible) {
	case 0:
		fit.PostFilter = Preemption(p, s.Nodes, mightHelp)
		return r, fit
	case 1:
		r.Node, r.Ties = r.Nodes[feasible[0]].Name, 1
		return r, nil
	}

	// Score the feasible nodes: each plugin over all of them, normalized,
	// then weighted into the totals.
	r.Scored = true
	for _, i := range feasible {
		r.Nodes[i].Scores = make([]int64, len(pr.Scores))
	}
	scores := make([]int64, len(feasible))
	var feasibleInfos []*NodeInfo
	for _, i := range feasible {
		feasibleInfos = append(feasibleInfos, s.Nodes[i])
	}
	for k, sc := range pr.Scores {
		if r.Scores[k].Skipped {
			continue
		}
		plugin := sc.Plugin
		if cs, ok := plugin.(CycleScorer); ok {
			var skip bool
			if plugin, skip = cs.ForCycle(p, s, feasibleInfos); skip {
				r.Scores[k].Skipped = true
				continue
			}
		}
		for j, i := range feasible {
			scores[j] = plugin.Score(p, s.Nodes[i], s)
		}
		if norm, ok := plugin.(ScoreNormalizer); ok {
			norm.NormalizeScores(scores)
		}
		for j, i := range feasible {
			r.Nodes[i].Scores[k] = scores[j]
			r.Nodes[i].Total += scores[j] * sc.Weight
		}
	}

	// Select: the best total; ties broken by reservoir sampling, as
	// kube-scheduler's selectHost: the k-th node with the best total so far
	// replaces the choice with probability 1/k, so each tied node is chosen
	// with the same probability in one pass.
	best := feasible[0]
	r.Ties = 1
	for _, i := range feasible[1:] {
		switch t := r.Nodes[i].Total; {
		case t > r.Nodes[best].Total:
			best, r.Ties = i, 1
		case t == r.Nodes[best].Total:
			r.Ties++
			if rng.IntN(r.Ties) == 0 {
				best = i
			}
		}
	}
	r.Node = r.Nodes[best].Name
	return r, nil
}
