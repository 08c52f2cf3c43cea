package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RuntimeClassAdmit is the mutating half of kube-apiserver's RuntimeClass
// admission plugin (plugin/pkg/admission/runtimeclass), run on pod creates.
// A pod names the RuntimeClass it runs under in spec.runtimeClassName; rc
// is that RuntimeClass as stored, or nil when there is none by that name.
//
//   - A pod naming no RuntimeClass is left alone: the node's default
//     handler runs it.
//   - A pod naming one that does not exist is refused (403):
//     `pod rejected: RuntimeClass "gvisor" not found`. Without the check
//     the pod would be scheduled and only its kubelet would find out.
//   - overhead.podFixed, what the runtime itself costs per pod (a gVisor
//     sandbox's own kernel, a VM's memory), becomes the pod's
//     spec.overhead, which the scheduler and ResourceQuota add to the
//     containers' requests. A pod that sets a different overhead itself is
//     refused.
//   - scheduling.nodeSelector is merged into the pod's nodeSelector, so the
//     pod lands only where the handler is installed (a value the pod
//     already sets differently is a conflict, refused), and
//     scheduling.tolerations are added to the pod's, so it tolerates the
//     taints that keep other pods off those nodes.
//
// It returns one note per decision or change, none for a pod naming no
// RuntimeClass.
func RuntimeClassAdmit(p *corev1.Pod, rc *nodev1.RuntimeClass) ([]string, error) {
	if p.Spec.RuntimeClassName == nil {
		return nil, nil // nothing to do: the node's default handler runs the pod
	}
	name := *p.Spec.RuntimeClassName
	if rc == nil {
		return nil, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	notes := []string{fmt.Sprintf("RuntimeClass %q: handler %q", name, rc.Handler)}
	if rc.Overhead != nil {
		if p.Spec.Overhead != nil && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, p.Spec.Overhead) {
			return notes, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		p.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
		notes = append(notes, fmt.Sprintf("set spec.overhead=%s", formatResourceList(p.Spec.Overhead)))
	}
	if s := rc.Scheduling; s != nil {
		merged := p.Spec.NodeSelector
		for _, key := range slices.Sorted(maps.Keys(s.NodeSelector)) {
			want := s.NodeSelector[key]
			if got, ok := merged[key]; ok && got != want {
				return notes, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", key, want, key, got))
			}
			if merged == nil {
				merged = map[string]string{}
			}
			if _, ok := merged[key]; !ok {
				notes = append(notes, fmt.Sprintf("added spec.nodeSelector[%s]=%s", key, want))
			}
			merged[key] = want
		}
		p.Spec.NodeSelector = merged
		for _, t := range s.Tolerations {
			if slices.ContainsFunc(p.Spec.Tolerations, func(have corev1.Toleration) bool { return apiequality.Semantic.DeepEqual(have, t) }) {
				continue
			}
			p.Spec.Tolerations = append(p.Spec.Tolerations, t)
			notes = append(notes, fmt.Sprintf("added toleration %s", formatToleration(t)))
		}
	}
	return notes, nil
}

// RuntimeClassValidate is the validating half of the plugin, run after
// every mutating plugin: the pod's spec.overhead must be its RuntimeClass's
// overhead.podFixed, and a pod whose RuntimeClass defines none (or that
// names none) may not set one: overhead is the RuntimeClass's to say, not
// the pod's, or a pod could lower what the scheduler counts for it.
func RuntimeClassValidate(p *corev1.Pod, rc *nodev1.RuntimeClass) ([]string, error) {
	if p.Spec.RuntimeClassName != nil && rc == nil {
		return nil, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("pod rejected: RuntimeClass %q not found", *p.Spec.RuntimeClassName))
	}
	if rc != nil && rc.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, p.Spec.Overhead) {
			return nil, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		return []string{fmt.Sprintf("spec.overhead matches RuntimeClass %q", rc.Name)}, nil
	}
	if p.Spec.Overhead != nil {
		return nil, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	if rc == nil {
		return nil, nil // no class, no overhead: nothing to check
	}
	return []string{fmt.Sprintf("RuntimeClass %q defines no overhead, and the pod sets none", rc.Name)}, nil
}

// validateRuntimeClass is kube's ValidateRuntimeClass: the handler (the
// name the node's runtime knows the OCI runtime by, "runc" or "runsc") is a
// DNS label, the overhead valid resource quantities, the scheduling
// constraints valid labels and tolerations.
func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
	}
	if rc.Overhead != nil {
		errs = append(errs, validateResourceRequirements(corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		schedPath := field.NewPath("scheduling")
		errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, schedPath.Child("nodeSelector"))...)
		errs = append(errs, validateTolerations(s.Tolerations, schedPath.Child("tolerations"))...)
	}
	return errs
}

// validateRuntimeClassUpdate is kube's ValidateRuntimeClassUpdate: the
// handler may not change (pods already running under the class would run
// under one runtime while the class names another).
func validateRuntimeClassUpdate(n, o *nodev1.RuntimeClass) field.ErrorList {
	return apivalidation.ValidateImmutableField(n.Handler, o.Handler, field.NewPath("handler"))
}

func formatResourceList(l corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(l) {
		q := l[name]
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	return strings.Join(parts, ",")
}

func formatToleration(t corev1.Toleration) string {
	s := t.Key
	if t.Operator == corev1.TolerationOpEqual || (t.Operator == "" && t.Value != "") {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	if s == "" {
		s = "(every taint)"
	}
	return s
}
