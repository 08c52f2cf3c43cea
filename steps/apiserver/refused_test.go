package apiserver

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fields kube-apiserver's ValidatePod refuses whatever the namespace's
// policy: each refused with its field path and text, and nothing stored.

// podWith is testPod("web") changed by fn.
func podWith(fn func(p *corev1.Pod)) *corev1.Pod {
	p := testPod("web")
	fn(p)
	return p
}

func withVolume(p *corev1.Pod, v corev1.Volume, m corev1.VolumeMount) {
	p.Spec.Volumes = append(p.Spec.Volumes, v)
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, m)
}

var emptyDir = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}

func ptrTo[T any](v T) *T { return &v }

func TestCreate_RefusesInvalidFields(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	const idRange = "must be between 0 and 2147483647, inclusive"

	tests := []struct {
		name string
		obj  Object
		says string // the whole field error, path and text
	}{
		{"subPath absolute", podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "/etc"})
		}), `spec.containers[0].volumeMounts.subPath: Invalid value: "/etc": must be a relative path`},
		{"subPath with ..", podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "logs/../../etc"})
		}), `spec.containers[0].volumeMounts.subPath: Invalid value: "logs/../../etc": must not contain '..'`},
		{"subPathExpr with ..", podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPathExpr: "$(POD_NAME)/.."})
		}), `spec.containers[0].volumeMounts.subPathExpr: Invalid value: "$(POD_NAME)/..": must not contain '..'`},
		{"subPath and subPathExpr", podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "a", SubPathExpr: "b"})
		}), `spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "b": subPathExpr and subPath are mutually exclusive`},
		{"init container subPath with ..", podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: emptyDir}}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: ".."}}}}
		}), `spec.initContainers[0].volumeMounts.subPath: Invalid value: "..": must not contain '..'`},
		{"hostPath with ..", podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/../../etc"}}}, corev1.VolumeMount{Name: "logs", MountPath: "/logs"})
		}), `spec.volumes[0].hostPath.path: Invalid value: "/var/log/../../etc": must not contain '..'`},
		{"pod runAsUser negative", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(-1))}
		}), "spec.securityContext.runAsUser: Invalid value: -1: " + idRange},
		{"pod runAsGroup negative", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: ptrTo(int64(-5))}
		}), "spec.securityContext.runAsGroup: Invalid value: -5: " + idRange},
		{"fsGroup negative", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptrTo(int64(-1))}
		}), "spec.securityContext.fsGroup: Invalid value: -1: " + idRange},
		{"supplementalGroups above range", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{10, 4294967296}}
		}), "spec.securityContext.supplementalGroups[1]: Invalid value: 4294967296: " + idRange},
		{"container runAsUser negative", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptrTo(int64(-1))}
		}), "spec.containers[0].securityContext.runAsUser: Invalid value: -1: " + idRange},
		{"container runAsGroup negative", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: ptrTo(int64(-1))}
		}), "spec.containers[0].securityContext.runAsGroup: Invalid value: -1: " + idRange},
		{"seccomp Localhost without a profile", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}
		}), "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"},
		{"seccomp Localhost profile with ..", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("../../etc/x.json")}}
		}), `spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "../../etc/x.json": must not contain '..'`},
		{"seccomp unknown type", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: "Strict"}}
		}), `spec.containers[0].securityContext.seccompProfile.type: Unsupported value: "Strict": supported values: "Localhost", "RuntimeDefault", "Unconfined"`},
		{"seccomp profile without Localhost", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault, LocalhostProfile: ptrTo("x.json")}}
		}), `spec.securityContext.seccompProfile.localhostProfile: Invalid value: {"type":"RuntimeDefault","localhostProfile":"x.json"}: can only be set when seccomp type is Localhost`},
		{"sysctl that is not a sysctl name", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_forward=1", Value: "1"}}}
		}), `spec.securityContext.sysctls[0].name: Invalid value: "net.ipv4.ip_forward=1": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`},
		{"sysctl twice", podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.shm_rmid_forced", Value: "0"}}}
		}), `spec.securityContext.sysctls[1].name: Duplicate value: "kernel.shm_rmid_forced"`},
		{"procMount Unmasked with host users", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptrTo(corev1.UnmaskedProcMount)}
		}), "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"},
		{"procMount unknown", podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers = ptrTo(false)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptrTo(corev1.ProcMountType("Raw"))}
		}), `spec.containers[0].securityContext.procMount: Unsupported value: "Raw": supported values: "Default", "Unmasked"`},
		{"hostUsers false with hostNetwork", podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.HostNetwork = ptrTo(false), true
		}), "spec.hostNetwork: Forbidden: when `hostUsers` is false"},
		{"hostUsers false with hostPID", podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.HostPID = ptrTo(false), true
		}), "spec.HostPID: Forbidden: when `hostUsers` is false"},
		{"hostUsers false with hostIPC", podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.HostIPC = ptrTo(false), true
		}), "spec.HostIPC: Forbidden: when `hostUsers` is false"},
		{"hostUsers false with volumeDevices", podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers = ptrTo(false)
			p.Spec.Volumes = []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}}
			p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
		}), "spec.containers[0].volumeDevices: Forbidden: when `hostUsers` is false"},
		{"deployment template hostUsers false with hostPID", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podWith(func(p *corev1.Pod) {
					p.Spec.HostUsers, p.Spec.HostPID = ptrTo(false), true
				}).Spec}}},
			"spec.template.spec.HostPID: Forbidden: when `hostUsers` is false"},
		{"ephemeral containers on create", podWith(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1.36"}}}
		}), "spec.ephemeralContainers: Forbidden: cannot be set on create"},
		{"nodeName with scheduling gates", podWith(func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}), "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"},
		{"AppArmor annotation for no container", podWith(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/db": "runtime/default"}
		}), `metadata.annotations[container.apparmor.security.beta.kubernetes.io/db]: Invalid value: "db": container not found`},
		{"AppArmor annotation profile", podWith(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "strict"}
		}), `metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Invalid value: "strict": invalid AppArmor profile name: "strict"`},
		{"appArmorProfile Localhost without a profile", podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}}
		}), "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost"},
		{"mirror pod without a node", podWith(func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}), `metadata.annotations[kubernetes.io/config.mirror]: Invalid value: "x": must set spec.nodeName if mirror pod annotation is set`},
		{"deployment template subPath with ..", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podWith(func(p *corev1.Pod) {
					withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "../x"})
				}).Spec}}},
			`Deployment.apps "web" is invalid: spec.template.spec.containers[0].volumeMounts.subPath: Invalid value: "../x": must not contain '..'`},
		{"replicaset template with ephemeral containers", &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podWith(func(p *corev1.Pod) {
					p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1.36"}}}
				}).Spec}}},
			"spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := revision(t, s)
			_, err := admin.Create(ctx(t), tt.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create = %v, want 422 Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error\n %s\ndoes not say\n %s", err, tt.says)
			}
			if after := revision(t, s); after != before {
				t.Errorf("the store moved from revision %d to %d after a refused create", before, after)
			}
		})
	}
}

// The same fields, used as Kubernetes allows them, pass.
func TestCreate_AcceptsValidSecurityFields(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	for i, p := range []*corev1.Pod{
		podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "data", VolumeSource: emptyDir}, corev1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "logs/web..1"})
		}),
		podWith(func(p *corev1.Pod) {
			withVolume(p, corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}, corev1.VolumeMount{Name: "logs", MountPath: "/logs"})
		}),
		podWith(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(0)), RunAsGroup: ptrTo(int64(2147483647)), FSGroup: ptrTo(int64(2000)),
				SupplementalGroups: []int64{0, 100}, Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}, {Name: "kernel/shm_rmid_forced", Value: "1"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/audit.json")}}
		}),
		podWith(func(p *corev1.Pod) {
			p.Spec.HostUsers = ptrTo(false)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptrTo(corev1.UnmaskedProcMount),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}),
		podWith(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "runtime/default"}
		}),
	} {
		p.Name = "web-" + itoa(int64(i))
		if _, err := admin.Create(ctx(t), p); err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
}

func TestUpdate_RefusesWhatMayNotChange(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	plain := mustCreate(t, admin, testPod("plain")).(*corev1.Pod)
	confined := mustCreate(t, admin, podWith(func(p *corev1.Pod) {
		p.Name = "confined"
		p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "runtime/default"}
	})).(*corev1.Pod)
	team := mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}).(*corev1.Namespace)

	tests := []struct {
		name string
		old  Object
		edit func(o Object)
		says string
	}{
		{"AppArmor annotation added", plain, func(o Object) {
			o.SetAnnotations(map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "unconfined"})
		}, "metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Forbidden: may not add AppArmor annotations"},
		{"AppArmor annotation changed", confined, func(o Object) {
			o.SetAnnotations(map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "unconfined"})
		}, "metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Forbidden: may not remove or update AppArmor annotations"},
		{"AppArmor annotation removed", confined, func(o Object) { o.SetAnnotations(nil) },
			"metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Forbidden: may not remove or update AppArmor annotations"},
		{"mirror pod annotation added", plain, func(o Object) {
			o.SetAnnotations(map[string]string{corev1.MirrorPodAnnotationKey: "x"})
		}, "metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation"},
		{"namespace enforce label invalid", team, func(o Object) {
			o.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": "strict"})
		}, `Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict"`},
		{"namespace enforce-version invalid", team, func(o Object) {
			o.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "1.30"})
		}, `Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.30"`},
		{"namespace warn label invalid", team, func(o Object) {
			o.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "none"})
		}, `Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "none"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.old.DeepCopyObject().(Object)
			tt.edit(edited)
			before := revision(t, s)
			_, err := admin.Update(ctx(t), edited)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Update = %v, want 422 Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error\n %s\ndoes not say\n %s", err, tt.says)
			}
			if after := revision(t, s); after != before {
				t.Errorf("the store moved from revision %d to %d after a refused update", before, after)
			}
		})
	}

	// other annotations may change, and a valid level may replace another
	ok := confined.DeepCopy()
	ok.Annotations["note"] = "fine"
	if _, err := admin.Update(ctx(t), ok); err != nil {
		t.Errorf("adding an unrelated annotation: %v", err)
	}
	relaxed := team.DeepCopy()
	relaxed.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := admin.Update(ctx(t), relaxed); err != nil {
		t.Errorf("changing enforce to baseline: %v", err)
	}
}
