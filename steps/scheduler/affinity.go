package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// requiredAffinity is a pod's hard placement rules on node labels: its
// nodeSelector, and its nodeAffinity's
// requiredDuringSchedulingIgnoredDuringExecution. Both must match (the
// semantics of k8s.io/component-helpers/scheduling/corev1/nodeaffinity,
// which kube-scheduler uses).
type requiredAffinity struct {
	selector labels.Selector // nodeSelector; nil when the pod has none
	terms    []nodeSelectorTerm
	hasTerms bool // required node affinity is set (even with no usable term)
}

// nodeSelectorTerm is one term: its label expressions AND its field
// expressions. The terms of a pod are ORed.
type nodeSelectorTerm struct {
	labels labels.Selector // nil when the term has no matchExpressions
	names  []nameRequirement
	broken bool // an expression could not be read: the term matches no node
}

// nameRequirement is a matchFields expression: the only field is
// metadata.name, with In or NotIn and one value.
type nameRequirement struct {
	in   bool
	name string
}

func newRequiredAffinity(pod *corev1.Pod) requiredAffinity {
	var a requiredAffinity
	if len(pod.Spec.NodeSelector) > 0 {
		a.selector = labels.SelectorFromSet(pod.Spec.NodeSelector)
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return a
	}
	a.hasTerms = true
	for _, t := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue // an empty term matches no node
		}
		a.terms = append(a.terms, newTerm(t))
	}
	return a
}

// operator maps a node selector operator to the label selector's.
func operator(op corev1.NodeSelectorOperator) (selection.Operator, bool) {
	switch op {
	case corev1.NodeSelectorOpIn:
		return selection.In, true
	case corev1.NodeSelectorOpNotIn:
		return selection.NotIn, true
	case corev1.NodeSelectorOpExists:
		return selection.Exists, true
	case corev1.NodeSelectorOpDoesNotExist:
		return selection.DoesNotExist, true
	case corev1.NodeSelectorOpGt:
		return selection.GreaterThan, true
	case corev1.NodeSelectorOpLt:
		return selection.LessThan, true
	}
	return "", false
}

func newTerm(t corev1.NodeSelectorTerm) nodeSelectorTerm {
	var term nodeSelectorTerm
	if len(t.MatchExpressions) > 0 {
		sel := labels.NewSelector()
		for _, e := range t.MatchExpressions {
			op, ok := operator(e.Operator)
			if !ok {
				return nodeSelectorTerm{broken: true}
			}
			// NewRequirement checks what the operator needs: values for In
			// and NotIn, none for Exists, one integer for Gt and Lt.
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				return nodeSelectorTerm{broken: true}
			}
			sel = sel.Add(*r)
		}
		term.labels = sel
	}
	for _, e := range t.MatchFields {
		if e.Key != "metadata.name" || len(e.Values) != 1 ||
			(e.Operator != corev1.NodeSelectorOpIn && e.Operator != corev1.NodeSelectorOpNotIn) {
			return nodeSelectorTerm{broken: true}
		}
		term.names = append(term.names, nameRequirement{in: e.Operator == corev1.NodeSelectorOpIn, name: e.Values[0]})
	}
	return term
}

func (t nodeSelectorTerm) matches(node *corev1.Node) bool {
	if t.broken {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
		return false
	}
	for _, r := range t.names {
		if (node.Name == r.name) != r.in {
			return false
		}
	}
	return true
}

// matches reports whether node satisfies both the nodeSelector and one of
// the required terms.
func (a requiredAffinity) matches(node *corev1.Node) bool {
	if a.selector != nil && !a.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if !a.hasTerms {
		return true
	}
	for _, t := range a.terms {
		if t.matches(node) {
			return true
		}
	}
	return false
}
