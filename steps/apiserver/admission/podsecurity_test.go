package admission

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newPodSecurity(t testing.TB) *PodSecurityAdmission {
	t.Helper()
	psa, err := NewPodSecurity()
	if err != nil {
		t.Fatalf("NewPodSecurity: %v", err)
	}
	return psa
}

// labelled is a namespace with the given labels, "k=v".
func labelled(kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{}}}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		ns.Labels[k] = v
	}
	return ns
}

const (
	enforceBaseline   = "pod-security.kubernetes.io/enforce=baseline"
	enforceRestricted = "pod-security.kubernetes.io/enforce=restricted"
)

// podWith is a defaulted nginx pod changed by f.
func podWith(f func(p *corev1.Pod)) *corev1.Pod {
	p := defaultedPod("web", ctr("web", "nginx"))
	f(p)
	return p
}

// hardened passes restricted: non-root, no escalation, ALL capabilities
// dropped, the runtime's default seccomp profile.
func hardened() *corev1.Pod {
	return podWith(func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	})
}

func TestPodSecurity_Pass(t *testing.T) {
	psa := newPodSecurity(t)
	privileged := podWith(func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
	})
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		pod  *corev1.Pod
		want []string
	}{
		{"baseline allows a plain nginx pod", labelled(enforceBaseline), defaultedPod("web", ctr("web", "nginx")),
			[]string{`PodSecurity "baseline:latest": allowed`}},
		{"restricted allows a hardened pod", labelled(enforceRestricted), hardened(),
			[]string{`PodSecurity "restricted:latest": allowed`}},
		{"no label means privileged", labelled(), privileged,
			[]string{`PodSecurity "privileged:latest": allowed (namespace has no pod-security.kubernetes.io/enforce label)`}},
		{"no namespace object means privileged", nil, privileged,
			[]string{`PodSecurity "privileged:latest": allowed (namespace has no pod-security.kubernetes.io/enforce label)`}},
		{"a pinned version", labelled(enforceBaseline, "pod-security.kubernetes.io/enforce-version=v1.25"), defaultedPod("web", ctr("web", "nginx")),
			[]string{`PodSecurity "baseline:v1.25": allowed`}},
		{"a stricter warn level warns", labelled(enforceBaseline, "pod-security.kubernetes.io/warn=restricted"), defaultedPod("web", ctr("web", "nginx")),
			[]string{`PodSecurity "baseline:latest": allowed`,
				`Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "web" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := psa.Admit(tc.ns, tc.pod)
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if !slices.Equal(notes, tc.want) {
				t.Errorf("notes:\n got: %q\nwant: %q", notes, tc.want)
			}
		})
	}
}

func TestPodSecurity_Fail(t *testing.T) {
	psa := newPodSecurity(t)
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		pod  *corev1.Pod
		want string
	}{
		{"baseline: privileged", labelled(enforceBaseline), podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		}), `pods "web" is forbidden: violates PodSecurity "baseline:latest": privileged (container "web" must not set securityContext.privileged=true)`},
		{"baseline: hostNetwork", labelled(enforceBaseline), podWith(func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
			`pods "web" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`},
		{"baseline: hostPath", labelled(enforceBaseline), podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), `pods "web" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`},
		{"baseline: SYS_ADMIN", labelled(enforceBaseline), podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}), `pods "web" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "web" must not include "SYS_ADMIN" in securityContext.capabilities.add)`},
		{"restricted: a plain pod, four reasons", labelled(enforceRestricted), defaultedPod("web", ctr("web", "nginx")),
			`pods "web" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "web" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`},
		{"restricted: hardened but root", labelled(enforceRestricted), func() *corev1.Pod {
			p := hardened()
			p.Spec.SecurityContext.RunAsNonRoot = nil
			p.Spec.SecurityContext.RunAsUser = ptr(int64(0))
			return p
		}(), `pods "web" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), runAsUser=0 (pod must not set runAsUser=0)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := psa.Admit(tc.ns, tc.pod)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("Admit = %v, want a 403 Forbidden", err)
			}
			wantErrText(t, err, tc.want)
		})
	}
}

func TestPodSecurity_BadLabels(t *testing.T) {
	psa := newPodSecurity(t)
	for _, tc := range []struct {
		name  string
		label string
		want  string
	}{
		{"level", "pod-security.kubernetes.io/enforce=strict",
			`metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`},
		{"version", "pod-security.kubernetes.io/enforce-version=1.30",
			`metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.30": must be "latest" or "v1.x"`},
		{"warn level", "pod-security.kubernetes.io/warn=everything",
			`metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "everything": must be one of privileged, baseline, restricted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := labelled(tc.label)
			_, err := psa.Admit(ns, defaultedPod("web", ctr("web", "nginx")))
			wantErrText(t, err, `pods "web" is forbidden: namespace "team" has an invalid PodSecurity label: `+tc.want)

			_, err = psa.AdmitNamespace(ns)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("AdmitNamespace = %v, want a 422 Invalid", err)
			}
			wantErrText(t, err, `Namespace "team" is invalid: `+tc.want)
		})
	}
	if _, err := psa.AdmitNamespace(labelled(enforceRestricted)); err != nil {
		t.Errorf("AdmitNamespace of a valid label: %v", err)
	}
}

func TestPodSecurity_AdmitTemplate(t *testing.T) {
	psa := newPodSecurity(t)
	tpl := &corev1.PodTemplateSpec{Spec: defaultedPod("", ctr("web", "nginx")).Spec}
	warnings := psa.AdmitTemplate(labelled(enforceRestricted), tpl)
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], `Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`) {
		t.Errorf("warnings = %q, want one restricted:latest warning", warnings)
	}
	if w := psa.AdmitTemplate(labelled(enforceBaseline), tpl); len(w) != 0 {
		t.Errorf("baseline namespace warned about a plain template: %q", w)
	}
	if w := psa.AdmitTemplate(labelled(), tpl); len(w) != 0 {
		t.Errorf("unlabelled namespace warned: %q", w)
	}
}
