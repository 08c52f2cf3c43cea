package kubelet

// What the kubelet of Kubernetes does with a PodSpec and podlab's does not
// do yet. A pod that sets such a field still runs, without it, as it would
// on a kubelet that does not know the field; the kubelet says so once per
// pod with a Warning event, reason Unsupported, naming the fields. (Parts
// it cannot run without, an init container or a volume type other than
// emptyDir and hostPath, fail the pod's container with ErrUnsupported
// instead.)

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonUnsupported is the reason of the event naming the fields of a pod
// podlab's kubelet ignores.
const ReasonUnsupported = "Unsupported"

// unsupportedField is a field a pod sets that podlab's kubelet ignores: its
// name (livenessProbe) and its path in the pod (spec.containers[0].livenessProbe).
type unsupportedField struct{ name, path string }

// unsupportedFields lists the fields pod sets that podlab's kubelet does
// not honour, in the order of the PodSpec. Fields left at their API
// defaults are not listed; neither are the scheduler's (affinity,
// tolerations, ...) nor those the kubelet refuses outright.
func unsupportedFields(pod *corev1.Pod) []unsupportedField {
	var out []unsupportedField
	add := func(set bool, name, path string) {
		if set {
			out = append(out, unsupportedField{name, path})
		}
	}
	s := &pod.Spec
	for i := range s.Containers {
		c := &s.Containers[i]
		p := fmt.Sprintf("spec.containers[%d]", i)
		add(c.LivenessProbe != nil, "livenessProbe", p+".livenessProbe")
		add(c.ReadinessProbe != nil, "readinessProbe", p+".readinessProbe")
		add(c.StartupProbe != nil, "startupProbe", p+".startupProbe")
		if l := c.Lifecycle; l != nil {
			add(l.PostStart != nil, "postStart", p+".lifecycle.postStart")
			add(l.PreStop != nil, "preStop", p+".lifecycle.preStop")
			add(l.StopSignal != nil, "stopSignal", p+".lifecycle.stopSignal")
		}
		for j, vm := range c.VolumeMounts {
			vp := fmt.Sprintf("%s.volumeMounts[%d]", p, j)
			add(vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone, "mountPropagation", vp+".mountPropagation")
			add(vm.SubPathExpr != "", "subPathExpr", vp+".subPathExpr")
			add(vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly != corev1.RecursiveReadOnlyDisabled, "recursiveReadOnly", vp+".recursiveReadOnly")
		}
		add(len(c.VolumeDevices) > 0, "volumeDevices", p+".volumeDevices")
		add(len(c.Resources.Claims) > 0, "resources.claims", p+".resources.claims")
		if sc := c.SecurityContext; sc != nil {
			add(sc.SELinuxOptions != nil, "seLinuxOptions", p+".securityContext.seLinuxOptions")
			add(sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined, "appArmorProfile", p+".securityContext.appArmorProfile")
			add(sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount, "procMount", p+".securityContext.procMount")
		}
	}
	add(len(s.EphemeralContainers) > 0, "ephemeralContainers", "spec.ephemeralContainers")
	add(s.ActiveDeadlineSeconds != nil, "activeDeadlineSeconds", "spec.activeDeadlineSeconds")
	add(s.DNSConfig != nil, "dnsConfig", "spec.dnsConfig")
	add(len(s.HostAliases) > 0, "hostAliases", "spec.hostAliases")
	add(len(s.ImagePullSecrets) > 0, "imagePullSecrets", "spec.imagePullSecrets")
	add(len(s.ReadinessGates) > 0, "readinessGates", "spec.readinessGates")
	add(s.Subdomain != "", "subdomain", "spec.subdomain")
	add(s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN, "setHostnameAsFQDN", "spec.setHostnameAsFQDN")
	add(len(s.ResourceClaims) > 0, "resourceClaims", "spec.resourceClaims")
	add(s.Resources != nil, "resources", "spec.resources")
	add(len(s.Overhead) > 0, "overhead", "spec.overhead")
	if sc := s.SecurityContext; sc != nil {
		add(sc.FSGroup != nil, "fsGroup", "spec.securityContext.fsGroup")
		add(sc.FSGroupChangePolicy != nil, "fsGroupChangePolicy", "spec.securityContext.fsGroupChangePolicy")
		add(sc.SELinuxOptions != nil, "seLinuxOptions", "spec.securityContext.seLinuxOptions")
		add(sc.SELinuxChangePolicy != nil, "seLinuxChangePolicy", "spec.securityContext.seLinuxChangePolicy")
		add(sc.SupplementalGroupsPolicy != nil && *sc.SupplementalGroupsPolicy != corev1.SupplementalGroupsPolicyMerge, "supplementalGroupsPolicy", "spec.securityContext.supplementalGroupsPolicy")
		add(sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined, "appArmorProfile", "spec.securityContext.appArmorProfile")
	}
	return out
}

// unsupportedMessage is the event's message: the fields by name, then
// where the pod sets them.
func unsupportedMessage(fs []unsupportedField) string {
	var names, paths []string
	for _, f := range fs {
		if !slices.Contains(names, f.name) {
			names = append(names, f.name)
		}
		paths = append(paths, f.path)
	}
	return fmt.Sprintf("podlab's kubelet does not honour %s yet: the pod runs without %s",
		strings.Join(names, ", "), strings.Join(paths, ", "))
}

// warnUnsupported records, once per pod, the Warning event naming the
// fields the pod sets that podlab's kubelet ignores.
func (k *Kubelet) warnUnsupported(ctx context.Context, pod *corev1.Pod) {
	fs := unsupportedFields(pod)
	if len(fs) == 0 {
		return
	}
	k.mu.Lock()
	warned := k.warned[pod.UID]
	k.warned[pod.UID] = true
	k.mu.Unlock()
	if warned {
		return
	}
	rec := &Recording{}
	k.event(ctx, pod, rec, corev1.EventTypeWarning, ReasonUnsupported, unsupportedMessage(fs))
	k.notify(Report{Pod: pod, Stage: Stage{Name: "admit", Why: strings.Join(rec.Events, "; ")}, Took: rec.Took})
}
