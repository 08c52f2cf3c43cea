package scheduler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

type filterCase struct {
	name string
	pod  *corev1.Pod
	node *corev1.Node
	on   []*corev1.Pod // pods already on the node
	want []string      // nil: passes
}

func runFilter(t *testing.T, f FilterPlugin, tests []filterCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.Filter(NewPodInfo(tt.pod), NewNodeInfo(tt.node, tt.on...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s.Filter = %q, want %q", f.Name(), got, tt.want)
			}
		})
	}
}

func TestNodeUnschedulable_Filter(t *testing.T) {
	runFilter(t, NodeUnschedulable{}, []filterCase{
		{"schedulable node", pod("web", "", ""), node("n", "2", "4Gi"), nil, nil},
		{"cordoned node", pod("web", "", ""), node("n", "2", "4Gi", cordoned), nil, []string{ReasonUnschedulable}},
		{"cordoned, tolerated", pod("web", "", "", tolerating(corev1.Toleration{
			Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
		})), node("n", "2", "4Gi", cordoned), nil, nil},
		{"cordoned, a NoExecute toleration does not do", pod("web", "", "", tolerating(corev1.Toleration{
			Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
		})), node("n", "2", "4Gi", cordoned), nil, []string{ReasonUnschedulable}},
	})
}

func TestNodeName_Filter(t *testing.T) {
	runFilter(t, NodeName{}, []filterCase{
		{"no node named", pod("web", "", ""), node("node-1", "2", "4Gi"), nil, nil},
		{"this node named", pod("web", "", "", boundTo("node-1")), node("node-1", "2", "4Gi"), nil, nil},
		{"another node named", pod("web", "", "", boundTo("node-2")), node("node-1", "2", "4Gi"), nil, []string{ReasonNodeName}},
	})
}

func TestNodeAffinity_Filter(t *testing.T) {
	n := node("node-1", "2", "4Gi", labeled("disk", "ssd", "zone", "a", "cores", "8"))
	no := []string{ReasonNodeAffinity}
	runFilter(t, NodeAffinity{}, []filterCase{
		{"nothing asked", pod("web", "", ""), n, nil, nil},
		{"nodeSelector matches", pod("web", "", "", selecting("disk", "ssd")), n, nil, nil},
		{"nodeSelector, one label differs", pod("web", "", "", selecting("disk", "ssd", "zone", "b")), n, nil, no},
		{"nodeSelector, label missing", pod("web", "", "", selecting("gpu", "true")), n, nil, no},
		{"In", pod("web", "", "", requiring(expr("zone", corev1.NodeSelectorOpIn, "a", "b"))), n, nil, nil},
		{"In, no value matches", pod("web", "", "", requiring(expr("zone", corev1.NodeSelectorOpIn, "b", "c"))), n, nil, no},
		{"NotIn", pod("web", "", "", requiring(expr("zone", corev1.NodeSelectorOpNotIn, "b"))), n, nil, nil},
		{"NotIn, value present", pod("web", "", "", requiring(expr("zone", corev1.NodeSelectorOpNotIn, "a"))), n, nil, no},
		{"Exists", pod("web", "", "", requiring(expr("disk", corev1.NodeSelectorOpExists))), n, nil, nil},
		{"Exists, label missing", pod("web", "", "", requiring(expr("gpu", corev1.NodeSelectorOpExists))), n, nil, no},
		{"DoesNotExist", pod("web", "", "", requiring(expr("gpu", corev1.NodeSelectorOpDoesNotExist))), n, nil, nil},
		{"DoesNotExist, label present", pod("web", "", "", requiring(expr("disk", corev1.NodeSelectorOpDoesNotExist))), n, nil, no},
		{"Gt", pod("web", "", "", requiring(expr("cores", corev1.NodeSelectorOpGt, "4"))), n, nil, nil},
		{"Gt, not greater", pod("web", "", "", requiring(expr("cores", corev1.NodeSelectorOpGt, "8"))), n, nil, no},
		{"Lt", pod("web", "", "", requiring(expr("cores", corev1.NodeSelectorOpLt, "16"))), n, nil, nil},
		{"Lt, not less", pod("web", "", "", requiring(expr("cores", corev1.NodeSelectorOpLt, "8"))), n, nil, no},
		{"Gt on a label that is not a number", pod("web", "", "", requiring(expr("zone", corev1.NodeSelectorOpGt, "1"))), n, nil, no},
		{"Gt with a value that is not a number", pod("web", "", "", requiring(expr("cores", corev1.NodeSelectorOpGt, "x"))), n, nil, no},
		{"terms are ORed", pod("web", "", "", requiring(
			expr("zone", corev1.NodeSelectorOpIn, "b"), expr("disk", corev1.NodeSelectorOpIn, "ssd"))), n, nil, nil},
		{"expressions of a term are ANDed", pod("web", "", "", requiring(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
			{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"hdd"}},
		}})), n, nil, no},
		{"an empty term matches nothing", pod("web", "", "", requiring(corev1.NodeSelectorTerm{})), n, nil, no},
		{"matchFields metadata.name In", pod("web", "", "", requiring(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}})), n, nil, nil},
		{"matchFields metadata.name NotIn", pod("web", "", "", requiring(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-1"}}}})), n, nil, no},
		{"nodeSelector and affinity must both match", pod("web", "", "", selecting("disk", "hdd"),
			requiring(expr("zone", corev1.NodeSelectorOpIn, "a"))), n, nil, no},
	})
}

func TestTaintToleration_Filter(t *testing.T) {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	// What DefaultTolerationSeconds admission gives every pod.
	defaults := tolerating(
		corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ref[int64](300)},
		corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ref[int64](300)},
	)
	gpu := node("n", "2", "4Gi", tainted("gpu=true:NoSchedule"))
	runFilter(t, TaintToleration{}, []filterCase{
		{"no taints", pod("web", "", ""), node("n", "2", "4Gi"), nil, nil},
		{"NoSchedule not tolerated", pod("web", "", ""), gpu, nil, []string{"node(s) had untolerated taint {gpu: true}"}},
		{"tolerated with Equal", pod("web", "", "", tolerating(corev1.Toleration{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})), gpu, nil, nil},
		{"Equal with another value", pod("web", "", "", tolerating(corev1.Toleration{Key: "gpu", Value: "false", Effect: corev1.TaintEffectNoSchedule})), gpu, nil,
			[]string{"node(s) had untolerated taint {gpu: true}"}},
		{"tolerated with Exists", pod("web", "", "", tolerating(exists("gpu", corev1.TaintEffectNoSchedule))), gpu, nil, nil},
		{"tolerated with an empty effect", pod("web", "", "", tolerating(exists("gpu", ""))), gpu, nil, nil},
		{"everything tolerated: empty key, Exists", pod("web", "", "", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})), gpu, nil, nil},
		{"NoExecute not tolerated", pod("web", "", ""), node("n", "2", "4Gi", tainted("dedicated=db:NoExecute")), nil,
			[]string{"node(s) had untolerated taint {dedicated: db}"}},
		{"PreferNoSchedule does not filter", pod("web", "", ""), node("n", "2", "4Gi", tainted("spot:PreferNoSchedule")), nil, nil},
		{"the first untolerated taint is the reason", pod("web", "", "", tolerating(exists("a", ""))),
			node("n", "2", "4Gi", tainted("a=1:NoSchedule", "b=2:NoSchedule", "c=3:NoSchedule")), nil,
			[]string{"node(s) had untolerated taint {b: 2}"}},
		{"Ready Unknown: unreachable", pod("web", "", "", defaults), node("n", "2", "4Gi", ready(corev1.ConditionUnknown)), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"no Ready condition: unreachable", pod("web", "", "", defaults), node("n", "2", "4Gi", func(n *corev1.Node) { n.Status.Conditions = nil }), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"Ready False: not-ready", pod("web", "", "", defaults), node("n", "2", "4Gi", ready(corev1.ConditionFalse)), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"not-ready tolerated for NoSchedule", pod("web", "", "", tolerating(exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule))),
			node("n", "2", "4Gi", ready(corev1.ConditionFalse)), nil, nil},
		{"memory pressure", pod("web", "", ""), node("n", "2", "4Gi", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue})
		}), nil, []string{"node(s) had untolerated taint {node.kubernetes.io/memory-pressure: }"}},
	})
}

func TestNodeResourcesFit_Filter(t *testing.T) {
	initContainer := func(cpu string, sidecar bool) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			c := corev1.Container{Name: "init", Image: "busybox", Resources: requests(cpu, "")}
			if sidecar {
				c.RestartPolicy = ref(corev1.ContainerRestartPolicyAlways)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
	n := node("n", "2", "4Gi")
	runFilter(t, NodeResourcesFit{}, []filterCase{
		{"fits an empty node", pod("web", "1", "1Gi"), n, nil, nil},
		{"fits exactly", pod("web", "2", "4Gi"), n, nil, nil},
		{"too much cpu", pod("web", "2500m", "1Gi"), n, nil, []string{"Insufficient cpu"}},
		{"too much memory", pod("web", "1", "5Gi"), n, nil, []string{"Insufficient memory"}},
		{"too much of both", pod("web", "3", "5Gi"), n, nil, []string{"Insufficient cpu", "Insufficient memory"}},
		{"the node's pods count", pod("web", "1", "1Gi"), n, []*corev1.Pod{pod("a", "600m", "1Gi"), pod("b", "600m", "1Gi")},
			[]string{"Insufficient cpu"}},
		{"finished pods do not count", pod("web", "1", "1Gi"), n, []*corev1.Pod{pod("a", "2", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, nil},
		{"too many pods", pod("web", "", ""), node("n", "2", "4Gi", maxPods("1")), []*corev1.Pod{pod("a", "", "")},
			[]string{"Too many pods"}},
		{"too many pods and too much cpu", pod("web", "3", ""), node("n", "2", "4Gi", maxPods("1")), []*corev1.Pod{pod("a", "", "")},
			[]string{"Too many pods", "Insufficient cpu"}},
		{"no requests: only the pod count", pod("web", "", ""), node("n", "0", "0"), nil, nil},
		{"an init container's request counts alone", pod("web", "1", "", initContainer("2500m", false)), n, nil,
			[]string{"Insufficient cpu"}},
		{"init containers: the largest, not the sum", pod("web", "1", "", initContainer("1500m", false), initContainer("1500m", false)), n, nil, nil},
		{"a sidecar adds to the containers", pod("web", "1500m", "", initContainer("600m", true)), n, nil,
			[]string{"Insufficient cpu"}},
		{"overhead counts", pod("web", "1900m", "", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
		}), n, nil, []string{"Insufficient cpu"}},
		{"an extended resource the node lacks", pod("web", "", "", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}), n, nil, []string{"Insufficient nvidia.com/gpu"}},
	})
}

func TestPodRequests(t *testing.T) {
	container := func(name, cpu, memory string) corev1.Container {
		return corev1.Container{Name: name, Image: "x", Resources: requests(cpu, memory)}
	}
	tests := []struct {
		name              string
		spec              corev1.PodSpec
		want, wantNonZero Resources
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{container("a", "100m", "64Mi"), container("b", "200m", "64Mi")}},
			Resources{MilliCPU: 300, Memory: 128 << 20}, Resources{MilliCPU: 300, Memory: 128 << 20}},
		{"no requests: the scoring defaults", corev1.PodSpec{Containers: []corev1.Container{container("a", "", ""), container("b", "", "")}},
			Resources{}, Resources{MilliCPU: 200, Memory: 400 << 20}},
		{"an explicit zero stays zero", corev1.PodSpec{Containers: []corev1.Container{container("a", "0", "0")}},
			Resources{}, Resources{}},
		{"init containers: the larger of the largest and the sum", corev1.PodSpec{
			InitContainers: []corev1.Container{container("i1", "1", "1Mi"), container("i2", "500m", "1Gi")},
			Containers:     []corev1.Container{container("a", "200m", "100Mi"), container("b", "200m", "100Mi")}},
			Resources{MilliCPU: 1000, Memory: 1 << 30}, Resources{MilliCPU: 1000, Memory: 1 << 30}},
		{"pod-level requests replace the sum", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			Containers: []corev1.Container{container("a", "100m", "64Mi")}},
			Resources{MilliCPU: 2000, Memory: 64 << 20}, Resources{MilliCPU: 2000, Memory: 64 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tt.spec}
			if got := PodRequests(p, false); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PodRequests = %+v, want %+v", got, tt.want)
			}
			if got := PodRequests(p, true); !reflect.DeepEqual(got, tt.wantNonZero) {
				t.Errorf("PodRequests(nonZero) = %+v, want %+v", got, tt.wantNonZero)
			}
		})
	}
}

func hostPorts(ports ...corev1.ContainerPort) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Ports = ports }
}

func TestNodePorts_Filter(t *testing.T) {
	n := node("node-1", "2", "4Gi")
	tcp80 := corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}
	no := []string{ReasonNodePorts}
	runFilter(t, NodePorts{}, []filterCase{
		{"no hostPort", pod("web", "", ""), n, []*corev1.Pod{pod("other", "", "", hostPorts(tcp80))}, nil},
		{"a free hostPort", pod("web", "", "", hostPorts(tcp80)), n, []*corev1.Pod{pod("other", "", "")}, nil},
		{"the same hostPort taken", pod("web", "", "", hostPorts(tcp80)), n, []*corev1.Pod{pod("other", "", "", hostPorts(tcp80))}, no},
		{"TCP is the default protocol", pod("web", "", "", hostPorts(tcp80)), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}))}, no},
		{"the same port, UDP", pod("web", "", "", hostPorts(tcp80)), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolUDP}))}, nil},
		{"only a containerPort", pod("web", "", "", hostPorts(tcp80)), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 8080}))}, nil},
		{"two hostIPs", pod("web", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.1"})), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.2"}))}, nil},
		{"a hostIP and every address", pod("web", "", "", hostPorts(corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.1"})), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(tcp80))}, no},
		{"the holder finished", pod("web", "", "", hostPorts(tcp80)), n,
			[]*corev1.Pod{pod("other", "", "", hostPorts(tcp80), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, nil},
	})
}
