package admission

import (
	"errors"
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"net"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation: the checks of k8s.io/kubernetes/pkg/apis/<group>/validation,
// run after defaulting and mutating admission. They look at the object alone
// (no other object is consulted) and report every problem at once, each with
// the path of the field it is about, so a user can fix them all in one go.

// ErrUnknownKind is returned by Validate and ValidateUpdate for an object of
// a kind podlab's API server does not serve.
var ErrUnknownKind = errors.New("admission: kind not served by podlab's API server")

// Validate checks a new object's fields as kube-apiserver does on create.
// A problem is returned as a 422 Invalid status error listing every field
// error, e.g.
//
//	Pod "Web" is invalid: metadata.name: Invalid value: "Web": a lowercase RFC 1123 subdomain must consist of ...
func Validate(obj runtime.Object) error {
	gk, m, errs, err := validateCreate(obj)
	if err != nil {
		return err
	}
	return invalid(gk, m, errs)
}

// ValidateUpdate checks an update of oldObj to newObj: newObj's fields as on
// create, plus what may not change. metadata.name, namespace, uid and
// creationTimestamp never change; a pod's spec only in its container images,
// activeDeadlineSeconds and added tolerations (and spec.nodeName from empty
// to a node, which is how podlab's scheduler binds); a Deployment's or
// ReplicaSet's selector, a binding's roleRef and a node's podCIDRs not at
// all.
//
// An empty metadata.resourceVersion on newObj is accepted as an
// unconditional update; kube-apiserver's store fills it in from the stored
// object before validating.
func ValidateUpdate(newObj, oldObj runtime.Object) error {
	gk, m, errs, err := validateUpdate(newObj, oldObj)
	if err != nil {
		return err
	}
	return invalid(gk, m, errs)
}

func invalid(gk schema.GroupKind, m *metav1.ObjectMeta, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	name := m.Name
	if name == "" {
		name = m.GenerateName
	}
	return apierrors.NewInvalid(gk, name, errs)
}

var (
	podKind                = schema.GroupKind{Kind: "Pod"}
	nodeKind               = schema.GroupKind{Kind: "Node"}
	namespaceKind          = schema.GroupKind{Kind: "Namespace"}
	eventKind              = schema.GroupKind{Kind: "Event"}
	limitRangeKind         = schema.GroupKind{Kind: "LimitRange"}
	resourceQuotaKind      = schema.GroupKind{Kind: "ResourceQuota"}
	deploymentKind         = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	replicaSetKind         = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	leaseKind              = schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"}
	runtimeClassKind       = schema.GroupKind{Group: nodev1.GroupName, Kind: "RuntimeClass"}
	mutatingWebhooksKind   = schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingWebhookConfiguration"}
	validatingWebhooksKind = schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "ValidatingWebhookConfiguration"}
	roleKind               = schema.GroupKind{Group: rbacv1.GroupName, Kind: "Role"}
	clusterRoleKind        = schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}
	roleBindingKind        = schema.GroupKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}
	clusterRoleBindingKind = schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"}
)

var metaPath = field.NewPath("metadata")

// validateCreate returns the kind, the metadata and the field errors of a
// new object.
func validateCreate(obj runtime.Object) (schema.GroupKind, *metav1.ObjectMeta, field.ErrorList, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		errs = append(errs, validatePod(o)...)
		return podKind, &o.ObjectMeta, append(errs, validatePodCreate(o)...), nil
	case *corev1.Node:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		return nodeKind, &o.ObjectMeta, append(errs, validateNode(o)...), nil
	case *corev1.Namespace:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.ValidateNamespaceName)
		return namespaceKind, &o.ObjectMeta, append(errs, validateNamespace(o)...), nil
	case *corev1.Event:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return eventKind, &o.ObjectMeta, append(errs, validateEvent(o)...), nil
	case *corev1.LimitRange:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return limitRangeKind, &o.ObjectMeta, append(errs, validateLimitRange(o)...), nil
	case *corev1.ResourceQuota:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return resourceQuotaKind, &o.ObjectMeta, append(errs, validateResourceQuota(o)...), nil
	case *appsv1.Deployment:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return deploymentKind, &o.ObjectMeta, append(errs, validateDeploymentSpec(&o.Spec)...), nil
	case *appsv1.ReplicaSet:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return replicaSetKind, &o.ObjectMeta, append(errs, validateReplicaSetSpec(&o.Spec)...), nil
	case *coordinationv1.Lease:
		errs := validateMeta(&o.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
		return leaseKind, &o.ObjectMeta, append(errs, validateLeaseSpec(&o.Spec)...), nil
	case *nodev1.RuntimeClass:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		return runtimeClassKind, &o.ObjectMeta, append(errs, validateRuntimeClass(o)...), nil
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		return mutatingWebhooksKind, &o.ObjectMeta, append(errs, validateWebhooks(mutatingFields(o.Webhooks))...), nil
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		return validatingWebhooksKind, &o.ObjectMeta, append(errs, validateWebhooks(validatingFields(o.Webhooks))...), nil
	case *rbacv1.Role:
		errs := validateMeta(&o.ObjectMeta, true, path.ValidatePathSegmentName)
		return roleKind, &o.ObjectMeta, append(errs, validateRules(o.Rules, true)...), nil
	case *rbacv1.ClusterRole:
		errs := validateMeta(&o.ObjectMeta, false, path.ValidatePathSegmentName)
		return clusterRoleKind, &o.ObjectMeta, append(errs, validateRules(o.Rules, false)...), nil
	case *rbacv1.RoleBinding:
		errs := validateMeta(&o.ObjectMeta, true, path.ValidatePathSegmentName)
		return roleBindingKind, &o.ObjectMeta, append(errs, validateBinding(o.RoleRef, o.Subjects, true)...), nil
	case *rbacv1.ClusterRoleBinding:
		errs := validateMeta(&o.ObjectMeta, false, path.ValidatePathSegmentName)
		return clusterRoleBindingKind, &o.ObjectMeta, append(errs, validateBinding(o.RoleRef, o.Subjects, false)...), nil
	}
	return schema.GroupKind{}, nil, nil, fmt.Errorf("validating %T: %w", obj, ErrUnknownKind)
}

// validateUpdate returns the kind, the new metadata and the field errors of
// an update.
func validateUpdate(newObj, oldObj runtime.Object) (schema.GroupKind, *metav1.ObjectMeta, field.ErrorList, error) {
	if fmt.Sprintf("%T", newObj) != fmt.Sprintf("%T", oldObj) {
		return schema.GroupKind{}, nil, nil, fmt.Errorf("validating an update: new object is a %T, old object a %T", newObj, oldObj)
	}
	switch n := newObj.(type) {
	case *corev1.Pod:
		o := oldObj.(*corev1.Pod)
		errs := validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
		errs = append(errs, validatePod(n)...)
		return podKind, &n.ObjectMeta, append(errs, validatePodUpdate(n, o)...), nil
	case *corev1.Node:
		o := oldObj.(*corev1.Node)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateNode(n)...)
		return nodeKind, &n.ObjectMeta, append(errs, validateNodeUpdate(n, o)...), nil
	case *corev1.Namespace:
		o := oldObj.(*corev1.Namespace)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateNamespace(n)...)
		return namespaceKind, &n.ObjectMeta, errs, nil
	case *corev1.Event:
		o := oldObj.(*corev1.Event)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateEvent(n)...)
		errs = append(errs, apivalidation.ValidateImmutableField(n.InvolvedObject, o.InvolvedObject, field.NewPath("involvedObject"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(n.Reason, o.Reason, field.NewPath("reason"))...)
		return eventKind, &n.ObjectMeta, errs, nil
	case *corev1.LimitRange:
		o := oldObj.(*corev1.LimitRange)
		return limitRangeKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateLimitRange(n)...), nil
	case *corev1.ResourceQuota:
		o := oldObj.(*corev1.ResourceQuota)
		return resourceQuotaKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateResourceQuota(n)...), nil
	case *appsv1.Deployment:
		o := oldObj.(*appsv1.Deployment)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateDeploymentSpec(&n.Spec)...)
		errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		return deploymentKind, &n.ObjectMeta, errs, nil
	case *appsv1.ReplicaSet:
		o := oldObj.(*appsv1.ReplicaSet)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateReplicaSetSpec(&n.Spec)...)
		errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		return replicaSetKind, &n.ObjectMeta, errs, nil
	case *coordinationv1.Lease:
		o := oldObj.(*coordinationv1.Lease)
		return leaseKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateLeaseSpec(&n.Spec)...), nil
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		o := oldObj.(*admissionregistrationv1.MutatingWebhookConfiguration)
		return mutatingWebhooksKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateWebhooks(mutatingFields(n.Webhooks))...), nil
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		o := oldObj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		return validatingWebhooksKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateWebhooks(validatingFields(n.Webhooks))...), nil
	case *nodev1.RuntimeClass:
		o := oldObj.(*nodev1.RuntimeClass)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateRuntimeClass(n)...)
		return runtimeClassKind, &n.ObjectMeta, append(errs, validateRuntimeClassUpdate(n, o)...), nil
	case *rbacv1.Role:
		o := oldObj.(*rbacv1.Role)
		return roleKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateRules(n.Rules, true)...), nil
	case *rbacv1.ClusterRole:
		o := oldObj.(*rbacv1.ClusterRole)
		return clusterRoleKind, &n.ObjectMeta, append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateRules(n.Rules, false)...), nil
	case *rbacv1.RoleBinding:
		o := oldObj.(*rbacv1.RoleBinding)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateBinding(n.RoleRef, n.Subjects, true)...)
		return roleBindingKind, &n.ObjectMeta, append(errs, validateRoleRefUpdate(n.RoleRef, o.RoleRef)...), nil
	case *rbacv1.ClusterRoleBinding:
		o := oldObj.(*rbacv1.ClusterRoleBinding)
		errs := append(validateMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validateBinding(n.RoleRef, n.Subjects, false)...)
		return clusterRoleBindingKind, &n.ObjectMeta, append(errs, validateRoleRefUpdate(n.RoleRef, o.RoleRef)...), nil
	}
	return schema.GroupKind{}, nil, nil, fmt.Errorf("validating an update of %T: %w", newObj, ErrUnknownKind)
}

// validateMeta is apimachinery's ValidateObjectMeta (name, namespace,
// labels, annotations, owner references, finalizers), except that a missing
// name is fine when generateName is set: the API server generates the name
// after validation has looked at the prefix.
func validateMeta(m *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(m, namespaced, nameFn, metaPath)
	if m.Name == "" && m.GenerateName != "" {
		errs = errs.Filter(func(err error) bool {
			var fe *field.Error
			return errors.As(err, &fe) && fe.Type == field.ErrorTypeRequired && fe.Field == "metadata.name"
		})
	}
	return errs
}

// validateMetaUpdate is apimachinery's ValidateObjectMetaUpdate, accepting an
// empty resourceVersion (an unconditional update).
func validateMetaUpdate(n, o *metav1.ObjectMeta) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaUpdate(n, o, metaPath)
	if n.ResourceVersion == "" {
		errs = errs.Filter(func(err error) bool {
			var fe *field.Error
			return errors.As(err, &fe) && fe.Field == "metadata.resourceVersion"
		})
	}
	return errs
}

// --- nodes and namespaces ---

func validateNode(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	for i, cidr := range n.Spec.PodCIDRs {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
		}
	}
	if n.Spec.PodCIDR != "" && (len(n.Spec.PodCIDRs) == 0 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR) {
		errs = append(errs, field.Invalid(specPath.Child("podCIDRs"), n.Spec.PodCIDRs, "first value must match `spec.podCIDR`"))
	}
	errs = append(errs, validateTaints(n.Spec.Taints, specPath.Child("taints"))...)
	statusPath := field.NewPath("status")
	errs = append(errs, validateQuantities(n.Status.Capacity, statusPath.Child("capacity"))...)
	errs = append(errs, validateQuantities(n.Status.Allocatable, statusPath.Child("allocatable"))...)
	return errs
}

func validateNodeUpdate(n, o *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	if len(o.Spec.PodCIDRs) > 0 && strings.Join(o.Spec.PodCIDRs, ",") != strings.Join(n.Spec.PodCIDRs, ",") {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`))
	}
	if o.Spec.ProviderID != "" && o.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	return errs
}

func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]map[string]bool{}
	for i, t := range taints {
		idx := fldPath.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, idx.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(idx.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, idx.Child("effect"))...)
		if seen[t.Effect][t.Key] {
			dup := field.Duplicate(idx, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = map[string]bool{}
		}
		seen[t.Effect][t.Key] = true
	}
	return errs
}

func validateTaintEffect(effect corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	case "":
		if allowEmpty {
			return nil
		}
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return field.ErrorList{field.NotSupported(fldPath, effect, []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
}

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// --- events ---

// validateEvent is kube-apiserver's legacy event validation, plus two checks
// kube-apiserver only makes on new-style events (those with an eventTime):
// podlab requires a reason and an involvedObject kind and name on every
// event, since `describe` lists events by the object they are about.
func validateEvent(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	io := e.InvolvedObject
	ioNamespace := field.NewPath("involvedObject", "namespace")
	if e.EventTime.IsZero() {
		if io.Namespace == "" {
			if e.Namespace != "" && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(ioNamespace, io.Namespace, "does not match event.namespace"))
			}
		} else if e.Namespace != io.Namespace {
			errs = append(errs, field.Invalid(ioNamespace, io.Namespace, "does not match event.namespace"))
		}
	} else {
		if io.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(ioNamespace, io.Namespace, "does not match event.namespace"))
		}
		if e.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingComponent"), ""))
		}
		if e.ReportingInstance == "" {
			errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
		}
		if e.Action == "" {
			errs = append(errs, field.Required(field.NewPath("action"), ""))
		}
	}
	if io.Kind == "" {
		errs = append(errs, field.Required(field.NewPath("involvedObject", "kind"), ""))
	}
	if io.Name == "" {
		errs = append(errs, field.Required(field.NewPath("involvedObject", "name"), ""))
	}
	if e.Reason == "" {
		errs = append(errs, field.Required(field.NewPath("reason"), ""))
	} else if len(e.Reason) > 128 {
		errs = append(errs, field.Invalid(field.NewPath("reason"), "", "can have at most 128 characters"))
	}
	return errs
}

// --- LimitRange and ResourceQuota ---

// validateLeaseSpec is kube's ValidateLeaseSpec: a positive duration, a
// transition count not below zero, a preferred holder only with a strategy.
func validateLeaseSpec(spec *coordinationv1.LeaseSpec) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	var errs field.ErrorList
	limitsPath := field.NewPath("spec", "limits")
	types := map[corev1.LimitType]bool{}
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		idx := limitsPath.Index(i)
		switch item.Type {
		case corev1.LimitTypeContainer, corev1.LimitTypePod, corev1.LimitTypePersistentVolumeClaim:
		case "":
			errs = append(errs, field.Required(idx.Child("type"), ""))
		default:
			if !strings.Contains(string(item.Type), "/") {
				errs = append(errs, field.Invalid(idx.Child("type"), item.Type, "must be a standard limit type or fully qualified"))
			}
		}
		if types[item.Type] {
			errs = append(errs, field.Duplicate(idx.Child("type"), item.Type))
		}
		types[item.Type] = true

		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(idx.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(idx.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		}
		lists := []struct {
			name string
			list corev1.ResourceList
		}{{"max", item.Max}, {"min", item.Min}, {"default", item.Default}, {"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}}
		keys := map[corev1.ResourceName]bool{}
		for _, l := range lists {
			errs = append(errs, validateQuantities(l.list, idx.Child(l.name))...)
			for name := range l.list {
				keys[name] = true
			}
		}
		for _, k := range sortedNames(keys) {
			errs = append(errs, validateLimitRangeItemResource(item, k, idx)...)
		}
	}
	return errs
}

// validateLimitRangeItemResource checks that min <= defaultRequest <=
// default <= max for one resource, and the ratio, with the real messages.
func validateLimitRangeItemResource(item *corev1.LimitRangeItem, k corev1.ResourceName, idx *field.Path) field.ErrorList {
	var errs field.ErrorList
	minQ, hasMin := item.Min[k]
	maxQ, hasMax := item.Max[k]
	def, hasDef := item.Default[k]
	defReq, hasDefReq := item.DefaultRequest[k]
	ratio, hasRatio := item.MaxLimitRequestRatio[k]
	key := string(k)
	if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("min").Key(key), minQ, fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
	}
	if hasDefReq && hasMin && minQ.Cmp(defReq) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), defReq.String())))
	}
	if hasDefReq && hasMax && defReq.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), maxQ.String())))
	}
	if hasDefReq && hasDef && defReq.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
	}
	if hasDef && hasMin && minQ.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(idx.Child("default").Key(key), minQ, fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), def.String())))
	}
	if hasDef && hasMax && def.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("default").Key(key), maxQ, fmt.Sprintf("default value %s is greater than max value %s", def.String(), maxQ.String())))
	}
	if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(idx.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax && minQ.Sign() > 0 {
		limit := float64(maxQ.MilliValue()) / float64(minQ.MilliValue())
		if float64(ratio.MilliValue())/1000 > limit {
			errs = append(errs, field.Invalid(idx.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), limit)))
		}
	}
	return errs
}

// standardQuotaResources are the resource names a ResourceQuota may limit
// without a domain prefix (IsStandardQuotaResourceName).
var standardQuotaResources = map[corev1.ResourceName]bool{
	corev1.ResourcePods: true, corev1.ResourceServices: true, corev1.ResourceReplicationControllers: true,
	corev1.ResourceQuotas: true, corev1.ResourceSecrets: true, corev1.ResourceConfigMaps: true,
	corev1.ResourcePersistentVolumeClaims: true, corev1.ResourceServicesNodePorts: true,
	corev1.ResourceServicesLoadBalancers: true, corev1.ResourceCPU: true, corev1.ResourceMemory: true,
	corev1.ResourceEphemeralStorage: true, corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true,
	corev1.ResourceRequestsStorage: true, corev1.ResourceRequestsEphemeralStorage: true,
	corev1.ResourceLimitsCPU: true, corev1.ResourceLimitsMemory: true, corev1.ResourceLimitsEphemeralStorage: true,
}

// integerQuotaResources are counted in whole objects.
func integerQuotaResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
		corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
		corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers:
		return true
	}
	return strings.HasPrefix(string(name), "count/")
}

func validateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	hardPath := specPath.Child("hard")
	for _, name := range sortedNames(q.Spec.Hard) {
		v := q.Spec.Hard[name]
		p := hardPath.Key(string(name))
		if !strings.Contains(string(name), "/") && !standardQuotaResources[name] && !isHugePages(name) && !strings.HasPrefix(string(name), "requests.hugepages-") {
			errs = append(errs, field.Invalid(p, name, "must be a standard resource for quota"))
		} else if strings.Contains(string(name), "/") {
			for _, msg := range validation.IsQualifiedName(string(name)) {
				errs = append(errs, field.Invalid(p, name, msg))
			}
		}
		if v.Sign() < 0 {
			errs = append(errs, field.Invalid(p, v.String(), apivalidation.IsNegativeErrorMsg))
		}
		if integerQuotaResource(name) && v.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(p, v.String(), "must be an integer"))
		}
	}
	scopesPath := specPath.Child("scopes")
	scopes := map[corev1.ResourceQuotaScope]bool{}
	for _, s := range q.Spec.Scopes {
		switch s {
		case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
			corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
			corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		default:
			errs = append(errs, field.Invalid(scopesPath, q.Spec.Scopes, "unsupported scope"))
		}
		scopes[s] = true
	}
	if (scopes[corev1.ResourceQuotaScopeTerminating] && scopes[corev1.ResourceQuotaScopeNotTerminating]) ||
		(scopes[corev1.ResourceQuotaScopeBestEffort] && scopes[corev1.ResourceQuotaScopeNotBestEffort]) {
		errs = append(errs, field.Invalid(scopesPath, q.Spec.Scopes, "conflicting scopes"))
	}
	if sel := q.Spec.ScopeSelector; sel != nil {
		exprPath := specPath.Child("scopeSelector", "matchExpressions")
		for i, req := range sel.MatchExpressions {
			idx := exprPath.Index(i)
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(idx.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(idx.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.Invalid(idx.Child("operator"), req.Operator, "not a valid selector operator"))
			}
		}
	}
	return errs
}

// validateQuantities checks that no quantity of list is negative.
func validateQuantities(list corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedNames(list) {
		if q := list[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(fldPath.Key(string(name)), q.String(), apivalidation.IsNegativeErrorMsg))
		}
	}
	return errs
}

// --- RBAC ---

func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		idx := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(idx.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(idx.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(idx.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(idx.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(idx.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	if namespaced {
		if ref.Kind != "Role" && ref.Kind != "ClusterRole" {
			errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, []string{"Role", "ClusterRole"}))
		}
	} else if ref.Kind != "ClusterRole" {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, []string{"ClusterRole"}))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range path.ValidatePathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		idx := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
					errs = append(errs, field.Invalid(idx.Child("name"), s.Name, msg))
				}
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(idx.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(idx.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(idx.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(idx.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func validateRoleRefUpdate(n, o rbacv1.RoleRef) field.ErrorList {
	if n != o {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), n, "cannot change roleRef")}
	}
	return nil
}
