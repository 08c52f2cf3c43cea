package admission

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePod checks a pod's spec and its pod-specific annotations (the
// rest of its metadata is checked by the caller).
func validatePod(p *corev1.Pod) field.ErrorList {
	return append(validatePodAnnotations(p), validatePodSpec(&p.Spec, field.NewPath("spec"), false)...)
}

// validatePodCreate is ValidatePodCreate's addition to validatePod:
// ephemeral containers (the ones `kubectl debug` adds to a running pod) come
// only through their own subresource, never with the pod, and a pod still
// gated from scheduling cannot name its node.
func validatePodCreate(p *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	if len(p.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create"))
	}
	if p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validatePodSpec is ValidatePodSpec: the containers, the volumes they
// mount and the pod-wide settings. template is true inside a Deployment or
// ReplicaSet, where a few pod-only checks do not apply.
func validatePodSpec(spec *corev1.PodSpec, specPath *field.Path, template bool) field.ErrorList {
	var errs field.ErrorList
	volumes, verrs := validateVolumes(spec.Volumes, specPath.Child("volumes"))
	errs = append(errs, verrs...)
	errs = append(errs, validateContainers(spec, specPath, volumes, template)...)
	errs = append(errs, validatePodSecurityContext(spec.SecurityContext, specPath.Child("securityContext"))...)
	errs = append(errs, validateHostUsers(spec, specPath)...)

	switch spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	case "":
		errs = append(errs, field.Required(specPath.Child("restartPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("restartPolicy"), spec.RestartPolicy, []corev1.RestartPolicy{
			corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	switch spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
	case "":
		errs = append(errs, field.Required(specPath.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("dnsPolicy"), spec.DNSPolicy, []corev1.DNSPolicy{
			corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}))
	}
	errs = append(errs, metavalidation.ValidateLabels(spec.NodeSelector, specPath.Child("nodeSelector"))...)
	if spec.ServiceAccountName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.ServiceAccountName, false) {
			errs = append(errs, field.Invalid(specPath.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.NodeName, false) {
			errs = append(errs, field.Invalid(specPath.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if ads := spec.ActiveDeadlineSeconds; ads != nil && (*ads < 1 || *ads > math.MaxInt32) {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *ads, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	errs = append(errs, validateTolerations(spec.Tolerations, specPath.Child("tolerations"))...)
	return errs
}

// validateVolumes checks names and that each volume has exactly one source;
// it returns the set of names containers may mount.
func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, v := range volumes {
		idx := fldPath.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(idx.Child("name"), ""))
		case names[v.Name]:
			errs = append(errs, field.Duplicate(idx.Child("name"), v.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), v.Name, msg))
			}
		}
		names[v.Name] = true

		sources := volumeSources(v.VolumeSource)
		switch {
		case len(sources) == 0:
			errs = append(errs, field.Required(idx, "must specify a volume type"))
		case len(sources) > 1:
			errs = append(errs, field.Forbidden(idx.Child(sources[1]), "may not specify more than 1 volume type"))
		}
		if v.HostPath != nil {
			if v.HostPath.Path == "" {
				errs = append(errs, field.Required(idx.Child("hostPath", "path"), ""))
			} else {
				errs = append(errs, validatePathNoBacksteps(v.HostPath.Path, idx.Child("hostPath", "path"))...)
			}
		}
	}
	return names, errs
}

// volumeSources returns the JSON names of the sources a volume sets.
func volumeSources(vs corev1.VolumeSource) []string {
	var set []string
	v := reflect.ValueOf(vs)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			set = append(set, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return set
}

func validateContainers(spec *corev1.PodSpec, specPath *field.Path, volumes map[string]bool, template bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	ctrPath := specPath.Child("containers")
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(ctrPath, ""))
	}
	// hostUsers is true unless the pod asked for a user namespace
	hostUsers := spec.HostUsers == nil || *spec.HostUsers
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], ctrPath.Index(i), names, volumes, spec.HostNetwork, hostUsers, template)...)
	}
	initPath := specPath.Child("initContainers")
	for i := range spec.InitContainers {
		errs = append(errs, validateContainer(&spec.InitContainers[i], initPath.Index(i), names, volumes, spec.HostNetwork, hostUsers, template)...)
	}
	return errs
}

func validateContainer(c *corev1.Container, p *field.Path, names, volumes map[string]bool, hostNetwork, hostUsers, template bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name == "":
		errs = append(errs, field.Required(p.Child("name"), ""))
	case names[c.Name]:
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	default:
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
	}
	names[c.Name] = true

	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	} else if !template && strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		errs = append(errs, field.Required(p.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []corev1.PullPolicy{
			corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(p.Child("terminationMessagePolicy"), "must be 'File' or 'FallbackToLogsOnError'"))
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, []corev1.TerminationMessagePolicy{
			corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	errs = append(errs, validatePorts(c.Ports, p.Child("ports"), hostNetwork)...)
	for i, e := range c.Env {
		idx := p.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
			continue
		}
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(idx.Child("name"), e.Name, msg))
		}
	}
	mountPaths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		idx := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		} else if !volumes[m.Name] {
			errs = append(errs, field.NotFound(idx.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		} else if mountPaths[m.MountPath] {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths[m.MountPath] = true
		errs = append(errs, validateSubPaths(m, p.Child("volumeMounts"), idx)...)
	}
	errs = append(errs, validateResourceRequirements(c.Resources, p.Child("resources"))...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, p.Child("securityContext"), hostUsers)...)
	return errs
}

var supportedProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

func validatePorts(ports []corev1.ContainerPort, fldPath *field.Path, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		idx := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(idx.Child("name"), port.Name, msg))
				}
			} else if names[port.Name] {
				errs = append(errs, field.Duplicate(idx.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(idx.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(idx.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(idx.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(idx.Child("containerPort"), port.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
		}
		if port.Protocol == "" {
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		} else if !slices.Contains(supportedProtocols, port.Protocol) {
			errs = append(errs, field.NotSupported(idx.Child("protocol"), port.Protocol, supportedProtocols))
		}
	}
	return errs
}

// validateResourceRequirements is ValidateContainerResourceRequirements:
// known resource names, no negative quantities, requests <= limits.
func validateResourceRequirements(r corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath := fldPath.Child("limits")
	reqPath := fldPath.Child("requests")
	for _, name := range sortedNames(r.Limits) {
		errs = append(errs, validateContainerResourceName(name, limPath.Key(string(name)))...)
		if q := r.Limits[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(limPath.Key(string(name)), q.String(), apivalidation.IsNegativeErrorMsg))
		}
	}
	for _, name := range sortedNames(r.Requests) {
		q := r.Requests[name]
		errs = append(errs, validateContainerResourceName(name, reqPath.Key(string(name)))...)
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(reqPath.Key(string(name)), q.String(), apivalidation.IsNegativeErrorMsg))
		}
		if lim, ok := r.Limits[name]; ok && q.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func validateContainerResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	if strings.Contains(string(name), "/") {
		var errs field.ErrorList
		for _, msg := range validation.IsQualifiedName(string(name)) {
			errs = append(errs, field.Invalid(fldPath, name, msg))
		}
		return errs
	}
	switch {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, isHugePages(name):
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, name, "must be a standard resource for containers")}
}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idx := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, idx.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idx.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idx.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				errs = append(errs, field.Invalid(idx.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idx.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(idx.Child("operator"), t.Operator, []corev1.TolerationOperator{
				corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		errs = append(errs, validateTaintEffect(t.Effect, true, idx.Child("effect"))...)
	}
	return errs
}

// podUpdateForbidden is kube-apiserver's message for a pod update that
// changes more than it may.
const podUpdateForbidden = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`," +
	"`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate is ValidatePodUpdate's spec rules. A pod is a running
// thing, not a wish: once created, what runs in it is fixed, and a change
// means a new pod (which is what a Deployment does). What may change:
// container images (the kubelet restarts that container), activeDeadlineSeconds
// (only shortened), tolerations (only added). podlab also lets spec.nodeName
// go from empty to a node: that is the scheduler's binding, which
// kube-apiserver takes through the pods/binding subresource instead.
func validatePodUpdate(n, o *corev1.Pod) field.ErrorList {
	errs := validatePodAnnotationUpdates(n, o)
	// the QoS class is computed once, on create (ValidatePodStatusUpdate)
	errs = append(errs, apivalidation.ValidateImmutableField(n.Status.QOSClass, o.Status.QOSClass, field.NewPath("status", "qosClass"))...)
	specPath := field.NewPath("spec")
	if len(n.Spec.Containers) != len(o.Spec.Containers) {
		return append(errs, field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers"))
	}
	if len(n.Spec.InitContainers) != len(o.Spec.InitContainers) {
		return append(errs, field.Forbidden(specPath.Child("initContainers"), "pod updates may not add or remove containers"))
	}
	if o.Spec.NodeName != "" && n.Spec.NodeName != o.Spec.NodeName {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), n.Spec.NodeName,
			fmt.Sprintf("pod %s is already assigned to node %q: a pod never moves to another node", o.Name, o.Spec.NodeName)))
	}
	if ads := n.Spec.ActiveDeadlineSeconds; ads != nil {
		if o.Spec.ActiveDeadlineSeconds != nil && *o.Spec.ActiveDeadlineSeconds < *ads {
			errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *ads, "must be less than or equal to previous value"))
		}
	} else if o.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), n.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	errs = append(errs, validateOnlyAddedTolerations(n.Spec.Tolerations, o.Spec.Tolerations, specPath.Child("tolerations"))...)

	if apiequality.Semantic.DeepEqual(n.Spec, o.Spec) {
		return errs
	}
	// Take the allowed changes back out; whatever still differs is forbidden.
	munged := n.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = o.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = o.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = o.Spec.ActiveDeadlineSeconds
	munged.Tolerations = o.Spec.Tolerations
	if o.Spec.NodeName == "" || n.Spec.NodeName != o.Spec.NodeName {
		// binding (empty to a node) is allowed; a move was reported above
		munged.NodeName = o.Spec.NodeName
	}
	if g := o.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if !apiequality.Semantic.DeepEqual(*munged, o.Spec) {
		errs = append(errs, field.Forbidden(specPath, podUpdateForbidden+"\n"+specDiff("spec", o.Spec, *munged)))
	}
	return errs
}

func validateOnlyAddedTolerations(n, o []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range o {
		found := false
		for _, t := range n {
			clone := old
			clone.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(clone, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// maxDiffLines caps the changed fields listed in a forbidden pod update.
const maxDiffLines = 10

// specDiff lists the fields that differ between two values, one per line as
// "  path: old -> new", by comparing their JSON forms. kube-apiserver prints
// a go-cmp diff of the whole PodSpec here; this is the same information,
// shorter.
func specDiff(root string, o, n any) string {
	var ov, nv any
	ob, _ := json.Marshal(o)
	nb, _ := json.Marshal(n)
	_ = json.Unmarshal(ob, &ov)
	_ = json.Unmarshal(nb, &nv)
	var lines []string
	diffJSON(root, ov, nv, &lines)
	if len(lines) > maxDiffLines {
		lines = append(lines[:maxDiffLines], fmt.Sprintf("  ... and %d more", len(lines)-maxDiffLines))
	}
	return strings.Join(lines, "\n")
}

func diffJSON(p string, o, n any, lines *[]string) {
	switch ot := o.(type) {
	case map[string]any:
		if nt, ok := n.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range ot {
				keys[k] = true
			}
			for k := range nt {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				diffJSON(p+"."+k, ot[k], nt[k], lines)
			}
			return
		}
	case []any:
		if nt, ok := n.([]any); ok && len(nt) == len(ot) {
			for i := range ot {
				diffJSON(fmt.Sprintf("%s[%d]", p, i), ot[i], nt[i], lines)
			}
			return
		}
	}
	if !reflect.DeepEqual(o, n) {
		ob, _ := json.Marshal(o)
		nb, _ := json.Marshal(n)
		*lines = append(*lines, fmt.Sprintf("  %s: %s -> %s", p, ob, nb))
	}
}

// --- Deployments and ReplicaSets ---

func validateDeploymentSpec(spec *appsv1.DeploymentSpec) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateReplicas(spec.Replicas, specPath)
	errs = append(errs, validateSelectorAndTemplate(spec.Selector, &spec.Template, specPath)...)
	errs = append(errs, validateStrategy(&spec.Strategy, specPath.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*pds), specPath.Child("progressDeadlineSeconds"))...)
		if *pds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(specPath.Child("progressDeadlineSeconds"), *pds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateReplicas(spec.Replicas, specPath)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	return append(errs, validateSelectorAndTemplate(spec.Selector, &spec.Template, specPath)...)
}

func validateReplicas(replicas *int32, specPath *field.Path) field.ErrorList {
	if replicas == nil {
		return nil
	}
	return apivalidation.ValidateNonnegativeField(int64(*replicas), specPath.Child("replicas"))
}

// validateSelectorAndTemplate is the shared part of ValidateDeploymentSpec
// and ValidateReplicaSetSpec: a controller finds its pods by its selector,
// so the selector must be set, non-empty, and match the labels its own
// template gives the pods, or it would create pods forever without ever
// seeing one.
func validateSelectorAndTemplate(sel *metav1.LabelSelector, tpl *corev1.PodTemplateSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := specPath.Child("selector")
	tplPath := specPath.Child("template")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, sel, "empty selector is invalid for deployment"))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		errs = append(errs, field.Invalid(selPath, sel, "invalid label selector"))
	} else if !selector.Empty() && !selector.Matches(labels.Set(tpl.Labels)) {
		errs = append(errs, field.Invalid(tplPath.Child("metadata", "labels"), tpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, metavalidation.ValidateLabels(tpl.Labels, tplPath.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(tpl.Annotations, tplPath.Child("metadata", "annotations"))...)
	tplSpecPath := tplPath.Child("spec")
	errs = append(errs, validatePodSpec(&tpl.Spec, tplSpecPath, true)...)
	if tpl.Spec.RestartPolicy != "" && tpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tplSpecPath.Child("restartPolicy"), tpl.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if len(tpl.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(tplSpecPath.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	if tpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tplSpecPath.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func validateStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		ru := s.RollingUpdate
		if ru == nil {
			return append(errs, field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil"))
		}
		ruPath := fldPath.Child("rollingUpdate")
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
		if ru.MaxUnavailable != nil && ru.MaxUnavailable.Type == intstr.String && intOrPercentValue(ru.MaxUnavailable) > 100 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), ru.MaxUnavailable, "must not be greater than 100%"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath, s, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

func validateIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.String {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		return errs
	}
	return apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)
}

// intOrPercentValue is the number in "25%" or 3; -1 when unparseable.
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	var n int
	if _, err := fmt.Sscanf(v.StrVal, "%d%%", &n); err != nil {
		return -1
	}
	return n
}
