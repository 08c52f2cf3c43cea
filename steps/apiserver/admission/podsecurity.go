package admission

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity: the Pod Security Standards are three levels of what a pod
// may ask of its node. privileged allows everything; baseline forbids the
// known ways out of a container (privileged containers, host namespaces,
// hostPath volumes, added capabilities beyond the default set, ...);
// restricted also requires running as non-root, dropping ALL capabilities,
// no privilege escalation and the RuntimeDefault seccomp profile. A
// namespace picks its level with labels:
//
//	pod-security.kubernetes.io/enforce: baseline        # reject pods that violate it
//	pod-security.kubernetes.io/enforce-version: v1.30   # the level as of that release (default latest)
//	pod-security.kubernetes.io/warn: restricted         # accept, but warn the client
//
// No label means privileged. The checks are the real ones, from
// k8s.io/pod-security-admission, the library kube-apiserver's PodSecurity
// plugin is built on.

// PodSecurityAdmission is kube-apiserver's PodSecurity admission plugin.
// Its evaluator indexes every check of every policy version; build it once
// with NewPodSecurity and share it (it is safe for concurrent use).
type PodSecurityAdmission struct {
	evaluator policy.Evaluator
}

// NewPodSecurity builds the Pod Security evaluator with the default checks.
func NewPodSecurity() (*PodSecurityAdmission, error) {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the pod security evaluator: %w", err)
	}
	return &PodSecurityAdmission{evaluator: ev}, nil
}

// defaultPolicy is what applies without labels: privileged, for all modes.
var defaultPolicy = api.Policy{
	Enforce: api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
	Warn:    api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
	Audit:   api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
}

// Admit evaluates a pod being created in ns against the namespace's
// enforce level. A violation is a 403 Forbidden, worded as kube-apiserver's:
//
//	pods "web" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), ...
//
// When the namespace's warn level is stricter than its enforce level and
// the pod violates it, the pod is admitted and a note starting with
// "Warning: " carries the text kube-apiserver sends as a warning header.
// A namespace with an invalid pod-security label (kube-apiserver refuses to
// store one, see AdmitNamespace) is an error naming the label and the
// allowed values.
func (a *PodSecurityAdmission) Admit(ns *corev1.Namespace, p *corev1.Pod) ([]string, error) {
	var nsLabels map[string]string
	if ns != nil {
		nsLabels = ns.Labels
	}
	pol, errs := api.PolicyToEvaluate(nsLabels, defaultPolicy)
	if len(errs) > 0 {
		return nil, apierrors.NewForbidden(podsResource, p.Name,
			fmt.Errorf("namespace %q has an invalid PodSecurity label: %v", ns.Name, errs.ToAggregate()))
	}
	result := policy.AggregateCheckResults(a.evaluator.EvaluatePod(pol.Enforce, &p.ObjectMeta, &p.Spec))
	if !result.Allowed {
		return nil, apierrors.NewForbidden(podsResource, p.Name,
			fmt.Errorf("violates PodSecurity %q: %s", pol.Enforce.String(), result.ForbiddenDetail()))
	}
	var notes []string
	if pol.Enforce.Level == api.LevelPrivileged {
		if _, labelled := nsLabels[api.EnforceLevelLabel]; labelled {
			notes = append(notes, fmt.Sprintf("PodSecurity %q: allowed (privileged allows everything)", pol.Enforce.String()))
		} else {
			notes = append(notes, fmt.Sprintf("PodSecurity %q: allowed (namespace has no %s label)", pol.Enforce.String(), api.EnforceLevelLabel))
		}
	} else {
		notes = append(notes, fmt.Sprintf("PodSecurity %q: allowed", pol.Enforce.String()))
	}
	if !pol.Warn.Equivalent(&pol.Enforce) {
		warn := policy.AggregateCheckResults(a.evaluator.EvaluatePod(pol.Warn, &p.ObjectMeta, &p.Spec))
		if !warn.Allowed {
			notes = append(notes, fmt.Sprintf("Warning: would violate PodSecurity %q: %s", pol.Warn.String(), warn.ForbiddenDetail()))
		}
	}
	return notes, nil
}

// AdmitTemplate is PodSecurity for a Deployment or ReplicaSet: the pod
// template is never rejected (the pods made from it will be, when they are
// created), but a template that would violate the namespace's enforce or
// warn level earns a warning, so the user learns now rather than from a
// ReplicaSet that cannot create its pods. It returns those warnings.
func (a *PodSecurityAdmission) AdmitTemplate(ns *corev1.Namespace, tpl *corev1.PodTemplateSpec) []string {
	if ns == nil {
		return nil
	}
	pol, errs := api.PolicyToEvaluate(ns.Labels, defaultPolicy)
	if len(errs) > 0 {
		return []string{fmt.Sprintf("Warning: namespace %q has an invalid PodSecurity label: %v", ns.Name, errs.ToAggregate())}
	}
	var warnings []string
	levels := []api.LevelVersion{pol.Enforce}
	if !pol.Warn.Equivalent(&pol.Enforce) {
		levels = append(levels, pol.Warn)
	}
	for _, lv := range levels {
		if lv.Level == api.LevelPrivileged {
			continue
		}
		res := policy.AggregateCheckResults(a.evaluator.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec))
		if !res.Allowed {
			warnings = append(warnings, fmt.Sprintf("Warning: would violate PodSecurity %q: %s", lv.String(), res.ForbiddenDetail()))
		}
	}
	return warnings
}

// AdmitNamespace is PodSecurity's check on a namespace create or update:
// its pod-security.kubernetes.io labels must name a valid level and version.
// kube-apiserver answers an invalid one with a 422, e.g.
//
//	Namespace "team" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted
func (a *PodSecurityAdmission) AdmitNamespace(ns *corev1.Namespace) ([]string, error) {
	pol, errs := api.PolicyToEvaluate(ns.Labels, defaultPolicy)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(namespaceKind, ns.Name, errs)
	}
	return []string{fmt.Sprintf("PodSecurity: namespace enforces %q, warns %q", pol.Enforce.String(), pol.Warn.String())}, nil
}

// AdmitNamespaceUpdate is PodSecurity's check on a namespace update. As on
// create, the pod-security.kubernetes.io labels must be valid, but only when
// the update changes what is wrong with them: a namespace stored with an
// invalid label before the check existed can still get other updates, not
// a new invalid value. kube-apiserver's plugin also dry-runs the namespace's
// pods against a stricter new enforce level, to warn; podlab does not.
func (a *PodSecurityAdmission) AdmitNamespaceUpdate(ns, old *corev1.Namespace) ([]string, error) {
	pol, errs := api.PolicyToEvaluate(ns.Labels, defaultPolicy)
	_, oldErrs := api.PolicyToEvaluate(old.Labels, defaultPolicy)
	if len(errs) > 0 && (len(oldErrs) == 0 || !reflect.DeepEqual(errs, oldErrs)) {
		return nil, apierrors.NewInvalid(namespaceKind, ns.Name, errs)
	}
	return []string{fmt.Sprintf("PodSecurity: namespace enforces %q, warns %q", pol.Enforce.String(), pol.Warn.String())}, nil
}
