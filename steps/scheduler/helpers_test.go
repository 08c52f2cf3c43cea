package scheduler

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// node is a Ready node with cpu, memory and 110 pods allocatable, and opts
// applied.
func node(name, cpu, memory string, opts ...func(*corev1.Node)) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity: alloc.DeepCopy(), Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func labeled(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// tainted adds key[=value]:Effect taints.
func tainted(taints ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, t := range taints {
			kv, effect, _ := strings.Cut(t, ":")
			k, v, _ := strings.Cut(kv, "=")
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
		}
	}
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func ready(status corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	}
}

func maxPods(count string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse(count) }
}

func images(sizes map[string]int64) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for name, size := range sizes {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{name}, SizeBytes: size})
		}
	}
}

// pod is a pod in default with one container requesting cpu and memory
// ("" for none), and opts applied.
func pod(name, cpu, memory string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25", Resources: requests(cpu, memory)}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(cpu, memory string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	if cpu != "" {
		r.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		r.Requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return r
}

func tolerating(tols ...corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tols...) }
}

func selecting(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

// requiring sets required node affinity with one term per argument.
func requiring(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func withImage(image string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }
}

func boundTo(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func ref[T any](v T) *T { return &v }
