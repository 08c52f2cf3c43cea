package admission

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefaultPod_Minimal(t *testing.T) {
	p := newPod("web", corev1.Container{Name: "web", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{ContainerPort: 80}}})
	notes := DefaultPod(p)

	want := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:                     "web",
				Image:                    "nginx:1.25",
				Ports:                    []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				ImagePullPolicy:          corev1.PullIfNotPresent,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			SchedulerName:                 "default-scheduler",
			TerminationGracePeriodSeconds: ptr(int64(30)),
			SecurityContext:               &corev1.PodSecurityContext{},
			EnableServiceLinks:            ptr(true),
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			Priority:                      ptr(int32(0)),
			PreemptionPolicy:              ptr(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	if !apiequality.Semantic.DeepEqual(*p, want) {
		t.Errorf("defaulted pod differs:\n%s", specDiff("pod", want, *p))
	}
	wantNotes := []string{
		"set spec.dnsPolicy=ClusterFirst",
		"set spec.restartPolicy=Always",
		"set spec.securityContext={}",
		"set spec.terminationGracePeriodSeconds=30",
		"set spec.schedulerName=default-scheduler",
		"set spec.containers[0].imagePullPolicy=IfNotPresent (image tag :1.25)",
		"set spec.containers[0].terminationMessagePath=/dev/termination-log",
		"set spec.containers[0].terminationMessagePolicy=File",
		"set spec.containers[0].ports[0].protocol=TCP",
		"set spec.enableServiceLinks=true",
		"set spec.serviceAccountName=default (ServiceAccount admission)",
		"set spec.priority=0 (Priority admission, no priorityClassName)",
		"set spec.preemptionPolicy=PreemptLowerPriority (Priority admission)",
		"set status.phase=Pending",
		"set status.qosClass=BestEffort",
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("notes:\n got: %q\nwant: %q", notes, wantNotes)
	}
}

func TestDefaultPod_Idempotent(t *testing.T) {
	p := defaultedPod("web", withResources(ctr("web", "nginx"), nil, rl("cpu=1", "memory=1Gi")))
	before := p.DeepCopy()
	if notes := DefaultPod(p); len(notes) != 0 {
		t.Errorf("second DefaultPod said %q, want nothing", notes)
	}
	if !apiequality.Semantic.DeepEqual(before, p) {
		t.Errorf("second DefaultPod changed the pod:\n%s", specDiff("pod", *before, *p))
	}
}

func TestDefaultPod_ImagePullPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		set         corev1.PullPolicy // already set by the user
		want        corev1.PullPolicy
	}{
		{name: "latest tag", image: "nginx:latest", want: corev1.PullAlways},
		{name: "no tag", image: "nginx", want: corev1.PullAlways},
		{name: "version tag", image: "nginx:1.25", want: corev1.PullIfNotPresent},
		{name: "digest", image: "nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31", want: corev1.PullIfNotPresent},
		{name: "latest tag and digest", image: "nginx:latest@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31", want: corev1.PullAlways},
		{name: "registry port no tag", image: "localhost:5000/nginx", want: corev1.PullAlways},
		{name: "registry port and tag", image: "localhost:5000/library/nginx:1.25", want: corev1.PullIfNotPresent},
		{name: "user choice kept", image: "nginx:latest", set: corev1.PullNever, want: corev1.PullNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ctr("web", tc.image)
			c.ImagePullPolicy = tc.set
			p := defaultedPod("web", c)
			if got := p.Spec.Containers[0].ImagePullPolicy; got != tc.want {
				t.Errorf("imagePullPolicy for %s = %s, want %s", tc.image, got, tc.want)
			}
		})
	}
}

func TestPodQOSClass(t *testing.T) {
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		want       corev1.PodQOSClass
	}{
		{name: "nothing set", containers: []corev1.Container{ctr("a", "x")}, want: corev1.PodQOSBestEffort},
		{name: "requests only", containers: []corev1.Container{withResources(ctr("a", "x"), rl("cpu=100m"), nil)}, want: corev1.PodQOSBurstable},
		{name: "limits equal requests", containers: []corev1.Container{withResources(ctr("a", "x"), rl("cpu=1", "memory=1Gi"), rl("cpu=1", "memory=1Gi"))}, want: corev1.PodQOSGuaranteed},
		{name: "limits only, requests defaulted from them", containers: []corev1.Container{withResources(ctr("a", "x"), nil, rl("cpu=1", "memory=1Gi"))}, want: corev1.PodQOSGuaranteed},
		{name: "requests below limits", containers: []corev1.Container{withResources(ctr("a", "x"), rl("cpu=500m", "memory=1Gi"), rl("cpu=1", "memory=1Gi"))}, want: corev1.PodQOSBurstable},
		{name: "cpu limit only", containers: []corev1.Container{withResources(ctr("a", "x"), nil, rl("cpu=1"))}, want: corev1.PodQOSBurstable},
		{name: "one container of two guaranteed", containers: []corev1.Container{
			withResources(ctr("a", "x"), nil, rl("cpu=1", "memory=1Gi")), ctr("b", "x")}, want: corev1.PodQOSBurstable},
		{name: "ephemeral storage does not count", containers: []corev1.Container{withResources(ctr("a", "x"), rl("ephemeral-storage=1Gi"), nil)}, want: corev1.PodQOSBestEffort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultedPod("web", tc.containers...)
			if p.Status.QOSClass != tc.want {
				t.Errorf("status.qosClass = %s, want %s", p.Status.QOSClass, tc.want)
			}
		})
	}
}

func TestDefaultPod_RequestsFromLimits(t *testing.T) {
	p := newPod("web", withResources(ctr("web", "nginx"), rl("cpu=250m"), rl("cpu=1", "memory=512Mi")))
	notes := DefaultPod(p)
	got := p.Spec.Containers[0].Resources.Requests
	if !apiequality.Semantic.DeepEqual(got, rl("cpu=250m", "memory=512Mi")) {
		t.Errorf("requests = %v, want cpu=250m (kept) memory=512Mi (from the limit)", got)
	}
	if !slices.Contains(notes, "set spec.containers[0].resources.requests.memory=512Mi (from limits)") {
		t.Errorf("no note about the memory request in %q", notes)
	}
}

func TestDefaultPod_ExistingTolerationKept(t *testing.T) {
	p := newPod("web", ctr("web", "nginx"))
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} // tolerates everything
	DefaultPod(p)
	if len(p.Spec.Tolerations) != 1 {
		t.Errorf("tolerations = %v, want only the user's match-all toleration", p.Spec.Tolerations)
	}
}

func TestDefaultPod_HostNetworkPorts(t *testing.T) {
	p := newPod("web", corev1.Container{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}})
	p.Spec.HostNetwork = true
	DefaultPod(p)
	if got := p.Spec.Containers[0].Ports[0].HostPort; got != 8080 {
		t.Errorf("hostPort = %d, want 8080 (the container port, with hostNetwork)", got)
	}
}

func TestDefaultDeployment(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{withResources(ctr("web", "nginx"), nil, rl("cpu=1"))}},
			},
		},
	}
	notes := DefaultDeployment(dep)
	s := dep.Spec
	if *s.Replicas != 1 || *s.RevisionHistoryLimit != 10 || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("replicas=%d revisionHistoryLimit=%d progressDeadlineSeconds=%d, want 1 10 600", *s.Replicas, *s.RevisionHistoryLimit, *s.ProgressDeadlineSeconds)
	}
	if s.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		*s.Strategy.RollingUpdate.MaxSurge != intstr.FromString("25%") || *s.Strategy.RollingUpdate.MaxUnavailable != intstr.FromString("25%") {
		t.Errorf("strategy = %+v, want RollingUpdate 25%%/25%%", s.Strategy)
	}
	tpl := s.Template.Spec
	if tpl.RestartPolicy != corev1.RestartPolicyAlways || tpl.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template spec not defaulted like a pod: restartPolicy=%q imagePullPolicy=%q", tpl.RestartPolicy, tpl.Containers[0].ImagePullPolicy)
	}
	// Pod-only defaults stay off the template, as in Kubernetes.
	if tpl.EnableServiceLinks != nil || tpl.ServiceAccountName != "" || len(tpl.Tolerations) != 0 || tpl.Containers[0].Resources.Requests != nil {
		t.Errorf("template got pod-only defaults: %+v", tpl)
	}
	for _, n := range notes {
		if strings.HasPrefix(n, "set status") {
			t.Errorf("a template has no status, but: %s", n)
		}
	}
	if !slices.Contains(notes, "set spec.template.spec.restartPolicy=Always") {
		t.Errorf("notes %q lack the template's restartPolicy", notes)
	}
}

func TestDefaultReplicaSet(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{ctr("web", "nginx:1.25")}}}}}
	DefaultReplicaSet(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("replicas=%d dnsPolicy=%q, want 1 and ClusterFirst", *rs.Spec.Replicas, rs.Spec.Template.Spec.DNSPolicy)
	}
}

func TestDefaultNamespaceAndNode(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	if notes := DefaultNamespace(ns); len(notes) != 2 {
		t.Errorf("namespace notes = %q, want the label and the phase", notes)
	}
	if ns.Labels["kubernetes.io/metadata.name"] != "team" || ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace = %+v, want label kubernetes.io/metadata.name=team and phase Active", ns)
	}

	n := &corev1.Node{Status: corev1.NodeStatus{Capacity: rl("cpu=2", "memory=4Gi", "pods=110")}}
	DefaultNode(n)
	if !apiequality.Semantic.DeepEqual(n.Status.Allocatable, n.Status.Capacity) {
		t.Errorf("allocatable = %v, want the capacity", n.Status.Allocatable)
	}
}

func TestDefaultLimitRange(t *testing.T) {
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: rl("cpu=2"), Min: rl("memory=64Mi")},
	}}}
	DefaultLimitRange(lr)
	item := lr.Spec.Limits[0]
	if !apiequality.Semantic.DeepEqual(item.Default, rl("cpu=2")) ||
		!apiequality.Semantic.DeepEqual(item.DefaultRequest, rl("cpu=2", "memory=64Mi")) {
		t.Errorf("default=%v defaultRequest=%v, want default cpu=2 (max) and defaultRequest cpu=2 (default), memory=64Mi (min)", item.Default, item.DefaultRequest)
	}
}

func TestDefaultRoleBinding(t *testing.T) {
	rb := &rbacv1.RoleBinding{
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Name: "default", Namespace: "default"}},
	}
	Default(rb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.Subjects[0].APIGroup != rbacv1.GroupName || rb.Subjects[1].APIGroup != "" {
		t.Errorf("roleRef.apiGroup=%q subjects=%+v, want rbac group on roleRef and the User, none on the ServiceAccount", rb.RoleRef.APIGroup, rb.Subjects)
	}
}
