package admission

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of a pod's paths and security settings: what a pod may ask of
// the node it runs on. A field that passes here may still be refused by
// PodSecurity admission (a hostPath at all, runAsUser 0 under restricted);
// these checks refuse what no namespace may allow, because it is malformed:
// a subPath that climbs out of its volume, a negative uid, a seccomp profile
// without a file, a sysctl that is not a sysctl name. Each is
// kube-apiserver's ValidatePod rule (pkg/apis/core/validation), with its
// field path and text.

// validateLocalDescendingPath is kube's rule for a path inside a volume
// (subPath, subPathExpr, a Localhost seccomp profile): relative, and never
// climbing with "..".
func validateLocalDescendingPath(target string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(fldPath, target, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(target, fldPath)...)
}

// validatePathNoBacksteps refuses a path with a ".." component; one error
// is enough even for "../../..".
func validatePathNoBacksteps(target string, fldPath *field.Path) field.ErrorList {
	for _, part := range strings.Split(filepath.ToSlash(target), "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(fldPath, target, "must not contain '..'")}
		}
	}
	return nil
}

// validateSubPaths checks one volume mount's subPath and subPathExpr.
// kube-apiserver reports them at the path of the container's volumeMounts
// list without the mount's index ("spec.containers[0].volumeMounts.subPath"),
// a quirk of its ValidateVolumeMounts kept here so the text is the same;
// only the "mutually exclusive" error names the mount.
func validateSubPaths(m corev1.VolumeMount, mountsPath, idx *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" {
		errs = append(errs, validateLocalDescendingPath(m.SubPath, mountsPath.Child("subPath"))...)
	}
	if m.SubPathExpr != "" {
		if m.SubPath != "" {
			errs = append(errs, field.Invalid(idx.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, mountsPath.Child("subPathExpr"))...)
	}
	return errs
}

// sysctlMaxLength and sysctlNameRegexp are kube's: dot- or slash-separated
// segments of lower-case letters, digits, '-' and '_'.
const sysctlMaxLength = 253

var sysctlNameRegexp = regexp.MustCompile("^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")

// validateRunAsIDs checks runAsUser and runAsGroup, of a pod or of a
// container: ids from 0 to 2147483647.
func validateRunAsIDs(user, group *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

// validatePodSecurityContext is validatePodSpecSecurityContext: ids in
// range, sysctl names, and the seccomp and AppArmor profiles.
func validatePodSecurityContext(sc *corev1.PodSecurityContext, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	errs = append(errs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	for i, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			errs = append(errs, field.Invalid(fldPath.Child("supplementalGroups").Index(i), gid, msg))
		}
	}
	names := map[string]bool{}
	for i, s := range sc.Sysctls {
		p := fldPath.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlNameRegexp.MatchString(s.Name):
			errs = append(errs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlNameRegexp)))
		case names[s.Name]:
			errs = append(errs, field.Duplicate(p, s.Name))
		}
		names[s.Name] = true
	}
	errs = append(errs, validateSeccompProfileField(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfileField(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
}

// validateSecurityContext is ValidateSecurityContext, a container's:
// hostUsers is false only for a pod that asked for a user namespace
// (spec.hostUsers: false), the one case where /proc may be Unmasked.
func validateSecurityContext(sc *corev1.SecurityContext, fldPath *field.Path, hostUsers bool) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	if sc.ProcMount != nil {
		switch *sc.ProcMount {
		case corev1.DefaultProcMount, corev1.UnmaskedProcMount:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("procMount"), *sc.ProcMount, []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
		}
		if hostUsers && *sc.ProcMount == corev1.UnmaskedProcMount {
			errs = append(errs, field.Invalid(fldPath.Child("procMount"), sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	errs = append(errs, validateSeccompProfileField(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
	}
	return append(errs, validateAppArmorProfileField(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
}

var seccompTypes = []corev1.SeccompProfileType{corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}

// validateSeccompProfileField: a known type, and a profile file (a path
// under the node's seccomp directory) exactly when the type is Localhost.
func validateSeccompProfileField(sp *corev1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), sp.Type, seccompTypes))
	}
	if sp.Type == corev1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			errs = append(errs, field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			errs = append(errs, validateLocalDescendingPath(*sp.LocalhostProfile, fldPath.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// validateAppArmorProfileField is ValidateAppArmorProfileField.
func validateAppArmorProfileField(profile *corev1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	if profile == nil {
		return nil
	}
	var errs field.ErrorList
	switch profile.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		const maxLocalhostProfileLength = 4095 // PATH_MAX - 1
		switch lp := profile.LocalhostProfile; {
		case lp == nil:
			errs = append(errs, field.Required(fldPath.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		case strings.TrimSpace(*lp) != *lp:
			errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), *lp, "must not be padded with whitespace"))
		case *lp == "":
			errs = append(errs, field.Required(fldPath.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		case len(*lp) > maxLocalhostProfileLength:
			errs = append(errs, field.TooLong(fldPath.Child("localhostProfile"), "", maxLocalhostProfileLength))
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if profile.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), profile.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), profile.Type,
			[]corev1.AppArmorProfileType{corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}))
	}
	return errs
}

var annotationsPath = field.NewPath("metadata", "annotations")

// validatePodAnnotations is ValidatePodSpecificAnnotations' seccomp,
// AppArmor and mirror pod rules: the legacy per-container annotations must
// name a container of the pod and a profile in their format, and a mirror
// pod (the kubelet's copy of a static pod) is always on a node.
func validatePodAnnotations(p *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	if v, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror && p.Spec.NodeName == "" {
		errs = append(errs, field.Invalid(annotationsPath.Key(corev1.MirrorPodAnnotationKey), v, "must set spec.nodeName if mirror pod annotation is set"))
	}
	for _, k := range sortedKeys(p.Annotations) {
		v := p.Annotations[k]
		if k == corev1.SeccompPodAnnotationKey || strings.HasPrefix(k, corev1.SeccompContainerAnnotationKeyPrefix) {
			errs = append(errs, validateSeccompAnnotation(v, annotationsPath.Key(k))...)
		}
		if !strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			continue
		}
		name := strings.TrimPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix)
		if !podHasContainer(&p.Spec, name) {
			errs = append(errs, field.Invalid(annotationsPath.Key(k), name, "container not found"))
		}
		if v != "" && v != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined &&
			!strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix) {
			errs = append(errs, field.Invalid(annotationsPath.Key(k), v, fmt.Sprintf("invalid AppArmor profile name: %q", v)))
		}
	}
	return errs
}

// validateSeccompAnnotation is ValidateSeccompProfile, for the legacy
// seccomp annotations.
func validateSeccompAnnotation(v string, fldPath *field.Path) field.ErrorList {
	switch {
	case v == corev1.SeccompProfileRuntimeDefault, v == corev1.DeprecatedSeccompProfileDockerDefault, v == corev1.SeccompProfileNameUnconfined:
		return nil
	case strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix):
		return validateLocalDescendingPath(strings.TrimPrefix(v, corev1.SeccompLocalhostProfileNamePrefix), fldPath)
	}
	return field.ErrorList{field.Invalid(fldPath, v, "must be a valid seccomp profile")}
}

// validatePodAnnotationUpdates is ValidatePodSpecificAnnotationUpdates: the
// AppArmor annotations are read once, when the pod's containers are
// created, so an update may not add, change or remove one (it would only
// make the pod lie about the profile its containers run with); neither may
// it make a pod a mirror pod or stop being one.
func validatePodAnnotationUpdates(n, o *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(o.Annotations) {
		if nv, ok := n.Annotations[k]; ok && nv == o.Annotations[k] {
			continue
		}
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			errs = append(errs, field.Forbidden(annotationsPath.Key(k), "may not remove or update AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			errs = append(errs, field.Forbidden(annotationsPath.Key(k), "may not remove or update mirror pod annotation"))
		}
	}
	for _, k := range sortedKeys(n.Annotations) {
		if _, ok := o.Annotations[k]; ok {
			continue
		}
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			errs = append(errs, field.Forbidden(annotationsPath.Key(k), "may not add AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			errs = append(errs, field.Forbidden(annotationsPath.Key(k), "may not add mirror pod annotation"))
		}
	}
	return errs
}

func podHasContainer(spec *corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validateHostUsers is kube-apiserver's validateHostUsers: a pod with
// hostUsers: false (a user namespace of its own) may not share the host's
// network, PID or IPC namespace (they belong to the host's user namespace,
// where the pod's root is nobody), nor use volumeDevices (a block device
// can be neither idmapped nor chowned). The paths are Kubernetes' own,
// HostPID and HostIPC capitalized included. (hostNetwork is allowed only
// behind v1.35's alpha gate UserNamespacesHostNetworkSupport, off by
// default; podlab has no such gate.)
func validateHostUsers(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	const why = "when `hostUsers` is false"
	var errs field.ErrorList
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(specPath.Child("hostNetwork"), why))
	}
	if spec.HostPID {
		errs = append(errs, field.Forbidden(specPath.Child("HostPID"), why))
	}
	if spec.HostIPC {
		errs = append(errs, field.Forbidden(specPath.Child("HostIPC"), why))
	}
	for i, c := range spec.InitContainers {
		if len(c.VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("initContainers").Index(i).Child("volumeDevices"), why))
		}
	}
	for i, c := range spec.Containers {
		if len(c.VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("containers").Index(i).Child("volumeDevices"), why))
		}
	}
	for i, c := range spec.EphemeralContainers {
		if len(c.VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers").Index(i).Child("volumeDevices"), why))
		}
	}
	return errs
}
