package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Each field podlab's kubelet ignores is named where the pod sets it; a
// field at its API default, or one the kubelet honours, is not.
func TestUnsupportedFields(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
	bidir, none := corev1.MountPropagationBidirectional, corev1.MountPropagationNone
	yes := true
	deadline := int64(30)
	group := int64(2000)
	cases := []struct {
		name string
		set  func(p *corev1.Pod)
		want []string // paths
	}{
		{"a plain pod", func(p *corev1.Pod) {}, nil},
		{"what the kubelet honours", func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.Hostname = true, "web"
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "x", MountPropagation: &none}}
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &group, SupplementalGroups: []int64{3000}}
		}, nil},
		{"probes", func(p *corev1.Pod) {
			p.Spec.Containers[1].LivenessProbe, p.Spec.Containers[1].ReadinessProbe, p.Spec.Containers[0].StartupProbe = probe, probe, probe
		}, []string{"spec.containers[0].startupProbe", "spec.containers[1].livenessProbe", "spec.containers[1].readinessProbe"}},
		{"lifecycle hooks", func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}},
				PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}, []string{"spec.containers[0].lifecycle.postStart", "spec.containers[0].lifecycle.preStop"}},
		{"volume mounts", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", MountPropagation: &bidir}, {Name: "v", MountPath: "/w", SubPathExpr: "$(POD)"}}
		}, []string{"spec.containers[0].volumeMounts[0].mountPropagation", "spec.containers[0].volumeMounts[1].subPathExpr"}},
		{"pod fields", func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds = &deadline
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db"}}}
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "ready.example.com"}}
			p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "svc", &yes
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &group}
		}, []string{"spec.activeDeadlineSeconds", "spec.dnsConfig", "spec.hostAliases", "spec.imagePullSecrets", "spec.readinessGates",
			"spec.subdomain", "spec.setHostnameAsFQDN", "spec.securityContext.fsGroup"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}, {Name: "side", Image: "busybox"}}}}
			tc.set(p)
			var got []string
			for _, f := range unsupportedFields(p) {
				got = append(got, f.path)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("unsupported fields:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestUnsupportedMessage(t *testing.T) {
	got := unsupportedMessage([]unsupportedField{{"livenessProbe", "spec.containers[0].livenessProbe"},
		{"readinessProbe", "spec.containers[0].readinessProbe"}, {"livenessProbe", "spec.containers[1].livenessProbe"}})
	const want = "podlab's kubelet does not honour livenessProbe, readinessProbe yet: the pod runs without " +
		"spec.containers[0].livenessProbe, spec.containers[0].readinessProbe, spec.containers[1].livenessProbe"
	if got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
}
