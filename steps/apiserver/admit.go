package apiserver

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// admitCreate runs defaulting, admission and validation for a new object,
// in kube-apiserver's order: the API's defaults (set when kube-apiserver
// decodes the request, before admission), mutating plugins
// (NamespaceLifecycle, DefaultTolerationSeconds, LimitRanger,
// NodeRestriction, RuntimeClass), validation of the object's fields, then validating plugins
// (PodSecurity, RuntimeClass, ResourceQuota, and RBAC's escalation check). It runs inside
// the write's own transaction, so what it reads (the namespace, limit
// ranges, quotas and the pods they count) cannot change before the write:
// two parallel creates against one quota cannot both squeeze in. It returns
// the quotas whose usage the new object changes, to be written with it.
func (c *Client) admitCreate(tx *store.Tx, u authn.User, res Resource, obj Object, tracked bool) ([]*corev1.ResourceQuota, error) {
	// A pod's create reads its namespace, its namespace's LimitRanges and
	// ResourceQuotas: on etcd, in one round trip.
	if _, isPod := obj.(*corev1.Pod); isPod {
		ns := obj.GetNamespace()
		if err := tx.Prefetch([]string{mustResource("namespaces").Key("", ns)},
			[]string{mustResource("limitranges").Prefix(ns), mustResource("resourcequotas").Prefix(ns)}); err != nil {
			return nil, err
		}
	}
	// The registry strategy's PrepareForCreate: kube-apiserver runs it after
	// the mutating plugins; podlab runs it before its defaults, which set
	// the first status (Pending, the QoS class) where the strategy does,
	// and LimitRanger computes the QoS class again when it adds resources.
	if notes := admission.PrepareForCreate(obj, c.now()); len(notes) > 0 {
		c.phase(PhaseStrategy, "PrepareForCreate", notes, nil)
	}
	// Defaulting is not admission: kube-apiserver sets the API's defaults
	// when it decodes the request, before the first admission plugin runs.
	pod, isPod := obj.(*corev1.Pod)
	var defaulted []string
	if isPod {
		defaulted = admission.DecodeDefaultsPod(pod)
	} else {
		defaulted = defaults(obj)
	}
	if err := c.phase(PhaseDefaulting, "defaults", defaulted, nil); err != nil {
		return nil, err
	}
	var ns *corev1.Namespace
	if res.Namespaced {
		var err error
		if ns, err = c.s.namespace(tx, obj.GetNamespace()); err != nil {
			return nil, err
		}
		notes, err := admission.NamespaceLifecycle(ns, obj.GetNamespace(), res.GroupResource(), obj.GetName())
		if err := c.phase(PhaseMutatingAdmission, "NamespaceLifecycle", notes, err); err != nil {
			return nil, err
		}
	}
	// kube-apiserver records managedFields on the object as decoded and
	// defaulted, before admission: the fields admission plugins add are
	// nobody's. (A client's create and an apply have recorded them
	// already; the API server's own bootstrap writes have not.)
	if !tracked {
		c.trackUpdate(res, "", nil, obj)
	}
	var limitRanges []corev1.LimitRange
	if isPod {
		c.phase(PhaseMutatingAdmission, "ServiceAccount", admission.ServiceAccount(pod), nil)
		c.phase(PhaseMutatingAdmission, "Priority", admission.Priority(pod), nil)
		if err := c.phase(PhaseMutatingAdmission, "DefaultTolerationSeconds", admission.DefaultTolerationSeconds(pod, c.s.tolerations), nil); err != nil {
			return nil, err
		}
		ranges, err := listTyped[*corev1.LimitRange](tx, mustResource("limitranges"), pod.Namespace)
		if err != nil {
			return nil, err
		}
		limitRanges = deref(ranges)
		if err := c.phase(PhaseMutatingAdmission, "LimitRanger", admission.LimitRangerMutate(pod, limitRanges), nil); err != nil {
			return nil, err
		}
	}
	if err := c.nodeRestriction(tx, u, admission.Create, res, "", obj.GetNamespace(), obj.GetName(), obj, nil); err != nil {
		return nil, err
	}
	var runtimeClass *nodev1.RuntimeClass
	if isPod {
		var err error
		if runtimeClass, err = podRuntimeClass(tx, pod); err != nil {
			return nil, err
		}
		notes, err := admission.RuntimeClassAdmit(pod, runtimeClass)
		if err := c.phase(PhaseMutatingAdmission, "RuntimeClass", notes, err); err != nil {
			return nil, err
		}
	}
	if err := c.callWebhooks(tx, u, true, admissionv1.Create, res, ns, obj, nil); err != nil {
		return nil, err
	}
	if isPod {
		// the pod strategy's PrepareForCreate, after mutating admission:
		// the QoS class of the resources admission settled on
		c.phase(PhaseStrategy, "PrepareForCreate", admission.PodStatusOnCreate(pod), nil)
	}
	if err := c.phase(PhaseValidation, "", nil, admission.Validate(obj)); err != nil {
		return nil, err
	}
	var updated []*corev1.ResourceQuota
	if isPod {
		notes, err := admission.LimitRangerValidate(pod, limitRanges)
		if err := c.phase(PhaseValidatingAdmission, "LimitRanger", notes, err); err != nil {
			return nil, err
		}
		notes, err = c.s.psa.Admit(ns, pod)
		if err := c.phase(PhaseValidatingAdmission, "PodSecurity", notes, err); err != nil {
			return nil, err
		}
		notes, err = admission.RuntimeClassValidate(pod, runtimeClass)
		if err := c.phase(PhaseValidatingAdmission, "RuntimeClass", notes, err); err != nil {
			return nil, err
		}
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		notes, err := c.s.psa.AdmitNamespace(o)
		if err := c.phase(PhaseValidatingAdmission, "PodSecurity", notes, err); err != nil {
			return nil, err
		}
	case *appsv1.Deployment:
		// templates only warn, as kube-apiserver's PodSecurity does
		c.phase(PhaseValidatingAdmission, "PodSecurity", c.s.psa.AdmitTemplate(ns, &o.Spec.Template), nil)
	case *appsv1.ReplicaSet:
		c.phase(PhaseValidatingAdmission, "PodSecurity", c.s.psa.AdmitTemplate(ns, &o.Spec.Template), nil)
	}
	if err := c.callWebhooks(tx, u, false, admissionv1.Create, res, ns, obj, nil); err != nil {
		return nil, err
	}
	if isPod {
		// ResourceQuota is the last validating plugin, after the webhooks:
		// a request they refuse uses no quota
		var err error
		if updated, err = c.quota(tx, pod); err != nil {
			return nil, err
		}
	}
	if err := c.escalation(tx, u, obj); err != nil {
		return nil, err
	}
	return updated, nil
}

// podRuntimeClass reads the RuntimeClass a pod names, in the write's
// transaction; nil when it names none or none by that name is stored.
func podRuntimeClass(tx *store.Tx, pod *corev1.Pod) (*nodev1.RuntimeClass, error) {
	if pod.Spec.RuntimeClassName == nil {
		return nil, nil
	}
	rc, err := getTyped[*nodev1.RuntimeClass](tx, mustResource("runtimeclasses"), "", *pod.Spec.RuntimeClassName)
	if err != nil {
		return nil, fmt.Errorf("reading RuntimeClass %q of pod %q: %w", *pod.Spec.RuntimeClassName, pod.Name, err)
	}
	return rc, nil
}

// quota runs ResourceQuota admission for a new pod against the namespace's
// quotas and the pods already stored there.
func (c *Client) quota(tx *store.Tx, pod *corev1.Pod) ([]*corev1.ResourceQuota, error) {
	quotas, err := listTyped[*corev1.ResourceQuota](tx, mustResource("resourcequotas"), pod.Namespace)
	if err != nil {
		return nil, err
	}
	if len(quotas) == 0 {
		if c.phases != nil {
			c.phase(PhaseValidatingAdmission, "ResourceQuota", []string{fmt.Sprintf("no ResourceQuota in namespace %q", pod.Namespace)}, nil)
		}
		return nil, nil
	}
	pods, err := listTyped[*corev1.Pod](tx, mustResource("pods"), pod.Namespace)
	if err != nil {
		return nil, err
	}
	updated, notes, err := admission.ResourceQuota(pod, deref(quotas), deref(pods))
	if err := c.phase(PhaseValidatingAdmission, "ResourceQuota", notes, err); err != nil {
		return nil, err
	}
	out := make([]*corev1.ResourceQuota, len(updated))
	for i := range updated {
		out[i] = &updated[i]
		// keep the stored revision, for the conditional write
		for _, q := range quotas {
			if q.Name == updated[i].Name {
				out[i].ResourceVersion = q.ResourceVersion
			}
		}
	}
	return out, nil
}

// escalation is RBAC's check on Roles and bindings: nobody may grant
// permissions they do not hold themselves, unless RBAC lets them "escalate"
// (roles) or "bind" (bindings). kube-apiserver runs it in the storage of
// those resources; podlab reports it with the validating admission phase.
func (c *Client) escalation(tx *store.Tx, u authn.User, obj Object) error {
	switch obj.(type) {
	case *rbacv1.Role, *rbacv1.ClusterRole, *rbacv1.RoleBinding, *rbacv1.ClusterRoleBinding:
	default:
		return nil
	}
	if c.bootstrap {
		return nil
	}
	p, err := c.s.policyIn(tx)
	if err != nil {
		return err
	}
	var what string
	switch o := obj.(type) {
	case *rbacv1.Role:
		err, what = rbac.ConfirmRoleWrite(p, u, o.Namespace, "", o.Rules), "the role's rules"
	case *rbacv1.ClusterRole:
		err, what = rbac.ConfirmRoleWrite(p, u, "", "", o.Rules), "the cluster role's rules"
	case *rbacv1.RoleBinding:
		err, what = rbac.ConfirmBindingWrite(p, u, o.Namespace, o.RoleRef), fmt.Sprintf("the rules of %s %q", o.RoleRef.Kind, o.RoleRef.Name)
	case *rbacv1.ClusterRoleBinding:
		err, what = rbac.ConfirmBindingWrite(p, u, "", o.RoleRef), fmt.Sprintf("the rules of %s %q", o.RoleRef.Kind, o.RoleRef.Name)
	default:
		return nil
	}
	if err != nil {
		res, _ := ResourceOf(obj)
		return c.phase(PhaseValidatingAdmission, "RBAC escalation check", nil, forbidden(res.GroupResource(), obj.GetName(), err))
	}
	return c.phase(PhaseValidatingAdmission, "RBAC escalation check", []string{fmt.Sprintf("user %q may grant %s: it holds them, or may escalate/bind", u.Name, what)}, nil)
}

// defaults sets the defaults Kubernetes sets on an object of this kind.
func defaults(obj Object) []string {
	return admission.Default(obj)
}

// phase reports one admission or validation phase and returns its error.
func (c *Client) phase(name, plugin string, notes []string, err error) error {
	if c.phases == nil {
		return err
	}
	p := Phase{Name: name, Plugin: plugin, Details: notes, Err: err}
	switch {
	case err != nil:
		p.Summary = "REJECTED: the request stops here and nothing is stored (the reason follows)"
	case len(notes) == 0 && name == PhaseValidation:
		p.Summary = "the object is valid"
	case len(notes) == 0:
		p.Summary = "nothing to do"
	case len(notes) == 1:
		p.Summary = notes[0]
		p.Details = nil
	default:
		p.Summary = fmt.Sprintf("%s (%d more)", notes[0], len(notes)-1)
	}
	c.report(p)
	return err
}

func deref[T any](in []*T) []T {
	out := make([]T, len(in))
	for i, p := range in {
		out[i] = *p
	}
	return out
}
