package admission

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Objects as a client would send them; tests default them first, as the API
// server does before validating.

func deployment(name string, selector, templateLabels map[string]string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: templateLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("web", "nginx:1.25")}},
			},
		},
	}
	DefaultDeployment(d)
	return d
}

func replicaSet(name string, selector, templateLabels map[string]string) *appsv1.ReplicaSet {
	d := deployment(name, selector, templateLabels)
	rs := &appsv1.ReplicaSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
	DefaultReplicaSet(rs)
	return rs
}

func namespace(name string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	DefaultNamespace(ns)
	return ns
}

func event(reason string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         reason,
		Message:        "Successfully assigned default/web to node-1",
	}
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }

func TestValidate_Pass(t *testing.T) {
	generated := defaultedPod("", ctr("web", "nginx"))
	generated.GenerateName = "web-"
	withVolume := defaultedPod("web", ctr("web", "nginx"))
	withVolume.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	withVolume.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}

	for _, tc := range []struct {
		name string
		obj  runtime.Object
	}{
		{"pod", defaultedPod("web", ctr("web", "nginx"))},
		{"pod with resources and ports", defaultedPod("web", corev1.Container{Name: "web", Image: "nginx:1.25",
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Requests: rl("cpu=100m", "memory=64Mi"), Limits: rl("cpu=1", "memory=64Mi")}})},
		{"pod with generateName only", generated},
		{"pod with a volume", withVolume},
		{"pod name of 253 characters", defaultedPod(strings.Repeat("a", 253), ctr("web", "nginx"))},
		{"deployment", deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web", "tier": "front"})},
		{"replicaset", replicaSet("web-6d4cf56db6", map[string]string{"app": "web"}, map[string]string{"app": "web"})},
		{"namespace", namespace("team-a")},
		{"node", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1.example"},
			Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"},
				Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}}},
		{"event", event("Scheduled")},
		{"limitrange", &corev1.LimitRange{ObjectMeta: meta("limits"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Min: rl("cpu=100m"), Max: rl("cpu=2"), Default: rl("cpu=500m"), DefaultRequest: rl("cpu=200m"), MaxLimitRequestRatio: rl("cpu=4")}}}}},
		{"resourcequota", &corev1.ResourceQuota{ObjectMeta: meta("compute"), Spec: corev1.ResourceQuotaSpec{
			Hard: rl("pods=10", "requests.cpu=4", "limits.memory=8Gi", "count/pods=20")}}},
		{"role", &rbacv1.Role{ObjectMeta: meta("reader"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}},
		{"clusterrole with a non-resource URL", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:health"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}},
		{"rolebinding", &rbacv1.RoleBinding{ObjectMeta: meta("read-pods"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}, {Kind: "ServiceAccount", Name: "default"}}}},
		{"clusterrolebinding", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:masters"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Validate(tc.obj); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidate_Fail(t *testing.T) {
	noContainers := defaultedPod("web")
	badPort := defaultedPod("web", corev1.Container{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 70000}}})
	badPolicy := defaultedPod("web", ctr("web", "nginx"))
	badPolicy.Spec.RestartPolicy = "Sometimes"
	badPolicy.Spec.DNSPolicy = "Google"
	badPolicy.Spec.Containers[0].ImagePullPolicy = "Maybe"
	negative := defaultedPod("web", withResources(ctr("web", "nginx"), rl("memory=-1Gi"), nil))
	unknownResource := defaultedPod("web", withResources(ctr("web", "nginx"), rl("gpu=1"), nil))
	missingVolume := defaultedPod("web", ctr("web", "nginx"))
	missingVolume.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	badToleration := defaultedPod("web", ctr("web", "nginx"))
	badToleration.Spec.Tolerations = append(badToleration.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: "Like"})
	badLabel := defaultedPod("web", ctr("web", "nginx"))
	badLabel.Labels = map[string]string{"app": "-web"}
	noNamespace := defaultedPod("web", ctr("web", "nginx"))
	noNamespace.Namespace = ""
	negativeReplicas := deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web"})
	negativeReplicas.Spec.Replicas = ptr(int32(-1))
	noSelector := deployment("web", nil, map[string]string{"app": "web"})
	noSelector.Spec.Selector = nil
	zeroRollout := deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web"})
	zeroRollout.Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(0))
	zeroRollout.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
	neverRestart := deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web"})
	neverRestart.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	templateNoImage := replicaSet("web", map[string]string{"app": "web"}, map[string]string{"app": "web"})
	templateNoImage.Spec.Template.Spec.Containers[0].Image = ""

	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want []string // each must appear in the error
	}{
		{"uppercase name", defaultedPod("Web", ctr("web", "nginx")),
			[]string{`Pod "Web" is invalid: metadata.name: Invalid value: "Web": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`}},
		{"name too long", defaultedPod(strings.Repeat("a", 254), ctr("web", "nginx")),
			[]string{"metadata.name: Invalid value: ", "must be no more than 253 characters"}},
		{"empty name", defaultedPod("", ctr("web", "nginx")),
			[]string{`Pod "" is invalid: metadata.name: Required value: name or generateName is required`}},
		{"no namespace", noNamespace, []string{"metadata.namespace: Required value"}},
		{"bad label value", badLabel, []string{`metadata.labels: Invalid value: "-web": a valid label must be an empty string or consist of alphanumeric characters`}},
		{"no containers", noContainers, []string{`Pod "web" is invalid: spec.containers: Required value`}},
		{"duplicate container names", defaultedPod("web", ctr("web", "nginx"), ctr("web", "redis")),
			[]string{`spec.containers[1].name: Duplicate value: "web"`}},
		{"container name not a DNS label", defaultedPod("web", ctr("Web_1", "nginx")),
			[]string{`spec.containers[0].name: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of`}},
		{"container without a name", defaultedPod("web", ctr("", "nginx")), []string{"spec.containers[0].name: Required value"}},
		{"missing image", defaultedPod("web", ctr("web", "")), []string{`Pod "web" is invalid: spec.containers[0].image: Required value`}},
		{"requests above limits", defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=2"), rl("cpu=1"))),
			[]string{`Pod "web" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		{"negative quantity", negative, []string{`spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`}},
		{"unknown resource", unknownResource, []string{`spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers`}},
		{"port out of range", badPort, []string{"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"enums", badPolicy, []string{
			`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
			`spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`,
			`spec.containers[0].imagePullPolicy: Unsupported value: "Maybe": supported values: "Always", "IfNotPresent", "Never"`}},
		{"mount of a missing volume", missingVolume, []string{`spec.containers[0].volumeMounts[0].name: Not found: "data"`}},
		{"toleration operator", badToleration, []string{`spec.tolerations[2].operator: Unsupported value: "Like": supported values: "Equal", "Exists"`}},
		{"selector does not match template", deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "api"}),
			[]string{"Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"api\"}: `selector` does not match template `labels`"}},
		{"no selector", noSelector, []string{"spec.selector: Required value"}},
		{"negative replicas", negativeReplicas, []string{"spec.replicas: Invalid value: -1: must be greater than or equal to 0"}},
		{"maxSurge and maxUnavailable both 0", zeroRollout, []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"}},
		{"template restartPolicy Never", neverRestart, []string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`}},
		{"replicaset template without image", templateNoImage, []string{`ReplicaSet.apps "web" is invalid: spec.template.spec.containers[0].image: Required value`}},
		{"namespace with a dot", namespace("team.a"), []string{`Namespace "team.a" is invalid: metadata.name: Invalid value: "team.a": must not contain dots`}},
		{"namespace uppercase", namespace("Team"), []string{`Namespace "Team" is invalid: metadata.name: Invalid value: "Team": a lowercase RFC 1123 label must consist of`}},
		{"namespaced field on a node", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "default"}},
			[]string{"metadata.namespace: Forbidden: not allowed on this type"}},
		{"node taint effect", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "Evict"}}}},
			[]string{`spec.taints[0].effect: Unsupported value: "Evict": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}},
		{"event without reason", event(""), []string{`Event "web.17a" is invalid: reason: Required value`}},
		{"event about another namespace", func() *corev1.Event { e := event("Pulled"); e.InvolvedObject.Namespace = "other"; return e }(),
			[]string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{"limitrange min above max", &corev1.LimitRange{ObjectMeta: meta("limits"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Min: rl("cpu=2"), Max: rl("cpu=1")}}}},
			[]string{`spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1`}},
		{"limitrange default on Pod type", &corev1.LimitRange{ObjectMeta: meta("limits"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypePod, Default: rl("cpu=1")}}}},
			[]string{"spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"}},
		{"quota negative and unknown", &corev1.ResourceQuota{ObjectMeta: meta("q"), Spec: corev1.ResourceQuotaSpec{Hard: rl("pods=-1", "gpus=1")}},
			[]string{`spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota`, `spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"role rule without verbs", &rbacv1.Role{ObjectMeta: meta("reader"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}},
			[]string{`Role.rbac.authorization.k8s.io "reader" is invalid: rules[0].verbs: Required value: verbs must contain at least one value`}},
		{"rolebinding roleRef kind", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "x"}},
			[]string{`roleRef.kind: Unsupported value: "Group": supported values: "Role", "ClusterRole"`}},
		{"rolebinding without roleRef name and bad subject", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role"},
			Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "r2"}}},
			[]string{"roleRef.name: Required value", `subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`}},
		{"clusterrolebinding to a Role", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "x"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}},
			[]string{`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`, "subjects[0].namespace: Required value"}},
		{"lease with a zero duration and negative transitions", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(0)), LeaseTransitions: ptr(int32(-1))}},
			[]string{"spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0", "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"}},
		{"lease with a preferred holder and no strategy", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"},
			Spec: coordinationv1.LeaseSpec{PreferredHolder: ptr("a")}},
			[]string{"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Validate = %v, want a 422 Invalid status error", err)
			}
			wantErrContains(t, err, tc.want...)
		})
	}
}

// A Validate of something podlab does not serve is a clear error, not a
// silent pass.
func TestValidate_BadInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"unknown kind", Validate(&corev1.Service{})},
		{"unknown kind update", ValidateUpdate(&corev1.ConfigMap{}, &corev1.ConfigMap{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrUnknownKind) {
				t.Errorf("err = %v, want ErrUnknownKind", tc.err)
			}
		})
	}
	if err := ValidateUpdate(&corev1.Pod{}, &corev1.Node{}); err == nil || !strings.Contains(err.Error(), "new object is a *v1.Pod, old object a *v1.Node") {
		t.Errorf("mismatched update = %v, want an error naming both types", err)
	}
}

// stored is a pod as it is in the store: defaulted, with a resourceVersion.
func stored(p *corev1.Pod) *corev1.Pod {
	p.ResourceVersion = "7"
	p.UID = "1c8f"
	return p
}

func TestValidateUpdate_Pass(t *testing.T) {
	old := stored(defaultedPod("web", corev1.Container{Name: "web", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}))
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"nothing", func(p *corev1.Pod) {}},
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.27" }},
		{"labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }},
		{"activeDeadlineSeconds set", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }},
		{"toleration added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
		}},
		{"bound to a node", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }},
		{"no resourceVersion (unconditional)", func(p *corev1.Pod) { p.ResourceVersion = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := old.DeepCopy()
			tc.change(n)
			if err := ValidateUpdate(n, old); err != nil {
				t.Errorf("ValidateUpdate: %v", err)
			}
		})
	}
}

func TestValidateUpdate_Fail(t *testing.T) {
	pod := stored(defaultedPod("web", corev1.Container{Name: "web", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}))
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "node-1"
	deadline := pod.DeepCopy()
	deadline.Spec.ActiveDeadlineSeconds = ptr(int64(60))
	dep := deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web"})
	dep.ResourceVersion = "3"
	rb := &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}}

	for _, tc := range []struct {
		name     string
		old      runtime.Object
		change   func(o runtime.Object)
		want     []string
		wantCode int32
	}{
		{"container port", pod, func(o runtime.Object) { o.(*corev1.Pod).Spec.Containers[0].Ports[0].ContainerPort = 8080 },
			[]string{"Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
				"\n  spec.containers[0].ports[0].containerPort: 80 -> 8080"}, 422},
		{"container resources", pod, func(o runtime.Object) {
			o.(*corev1.Pod).Spec.Containers[0].Resources.Limits = rl("cpu=1")
		}, []string{"spec: Forbidden: pod updates may not change fields other than", `spec.containers[0].resources.limits: null -> {"cpu":"1"}`}, 422},
		{"container added", pod, func(o runtime.Object) {
			p := o.(*corev1.Pod)
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
			p.Spec.Containers[1].Name = "sidecar"
		}, []string{"spec.containers: Forbidden: pod updates may not add or remove containers"}, 422},
		{"nodeName changed", bound, func(o runtime.Object) { o.(*corev1.Pod).Spec.NodeName = "node-2" },
			[]string{`spec.nodeName: Invalid value: "node-2": pod web is already assigned to node "node-1"`}, 422},
		{"nodeName cleared", bound, func(o runtime.Object) { o.(*corev1.Pod).Spec.NodeName = "" },
			[]string{`spec.nodeName: Invalid value: "": pod web is already assigned to node "node-1"`}, 422},
		{"activeDeadlineSeconds raised", deadline, func(o runtime.Object) { o.(*corev1.Pod).Spec.ActiveDeadlineSeconds = ptr(int64(120)) },
			[]string{"spec.activeDeadlineSeconds: Invalid value: 120: must be less than or equal to previous value"}, 422},
		{"toleration removed", pod, func(o runtime.Object) { o.(*corev1.Pod).Spec.Tolerations = nil },
			[]string{"spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"}, 422},
		{"name changed", pod, func(o runtime.Object) { o.(*corev1.Pod).Name = "web2" },
			[]string{`metadata.name: Invalid value: "web2": field is immutable`}, 422},
		{"deployment selector", dep, func(o runtime.Object) {
			d := o.(*appsv1.Deployment)
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
			d.Spec.Template.Labels = map[string]string{"app": "api"}
		}, []string{`Deployment.apps "web" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"api"}}: field is immutable`}, 422},
		{"rolebinding roleRef", rb, func(o runtime.Object) { o.(*rbacv1.RoleBinding).RoleRef.Name = "admin" },
			[]string{`roleRef: Invalid value: {"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"admin"}: cannot change roleRef`}, 422},
		{"node podCIDR", node, func(o runtime.Object) {
			n := o.(*corev1.Node)
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"}
		}, []string{`spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid`}, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.old.DeepCopyObject()
			tc.change(n)
			err := ValidateUpdate(n, tc.old)
			wantErrContains(t, err, tc.want...)
			var status apierrors.APIStatus
			if errors.As(err, &status) && status.Status().Code != tc.wantCode {
				t.Errorf("status code %d, want %d", status.Status().Code, tc.wantCode)
			}
		})
	}
}
