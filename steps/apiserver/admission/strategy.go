package admission

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PrepareForCreate is what kube-apiserver's registry strategies do to a new
// object before validating it (PrepareForCreate in
// pkg/registry/<group>/<resource>/strategy.go): a status is the report of
// the component that acts on the object — the kubelet for a pod, the
// Deployment controller for a Deployment — so a client cannot create an
// object with one. Whatever status it sent is dropped, and the defaults
// (DefaultPod, DefaultNamespace) then set the first one: a pod is Pending
// with its QoS class computed, a namespace Active. Were the status kept, a
// pod created as `phase: Succeeded` would not count against its
// namespace's ResourceQuota, and one created `Running` would look started
// to every controller.
//
// Pods, Deployments, ReplicaSets, Namespaces and ResourceQuotas lose their
// status; a Node keeps it (the kubelet registers its node with the capacity
// it found); the other kinds have no status. A pod with scheduling gates
// gets the condition PodScheduled=False, reason SchedulingGated, set at
// now: the scheduler leaves it alone until its gates are removed. It
// returns a note for each thing it did.
func PrepareForCreate(obj runtime.Object, now time.Time) []string {
	switch o := obj.(type) {
	case *corev1.Pod:
		var notes []string
		if isSet(&o.Status) {
			notes = append(notes, fmt.Sprintf("dropped the status the client sent (phase %q): a new pod's status is the API server's, then the kubelet's (pod strategy PrepareForCreate)", o.Status.Phase))
			o.Status = corev1.PodStatus{}
		}
		if len(o.Spec.SchedulingGates) > 0 {
			o.Status.Conditions = append(o.Status.Conditions, corev1.PodCondition{
				Type:               corev1.PodScheduled,
				Status:             corev1.ConditionFalse,
				Reason:             corev1.PodReasonSchedulingGated,
				Message:            "Scheduling is blocked due to non-empty scheduling gates",
				LastTransitionTime: metav1.NewTime(now),
			})
			notes = append(notes, fmt.Sprintf("set condition PodScheduled=False (%s): the pod has %d scheduling gate(s)", corev1.PodReasonSchedulingGated, len(o.Spec.SchedulingGates)))
		}
		return notes
	case *appsv1.Deployment:
		if isSet(&o.Status) {
			o.Status = appsv1.DeploymentStatus{}
			return []string{"dropped the status the client sent: a Deployment's status is its controller's (deployment strategy PrepareForCreate)"}
		}
	case *appsv1.ReplicaSet:
		if isSet(&o.Status) {
			o.Status = appsv1.ReplicaSetStatus{}
			return []string{"dropped the status the client sent: a ReplicaSet's status is its controller's (replicaset strategy PrepareForCreate)"}
		}
	case *corev1.Namespace:
		if o.Status.Phase != corev1.NamespaceActive && isSet(&o.Status) {
			note := fmt.Sprintf("dropped the status the client sent (phase %q): a new namespace is Active (namespace strategy PrepareForCreate)", o.Status.Phase)
			o.Status = corev1.NamespaceStatus{}
			return []string{note}
		}
		o.Status = corev1.NamespaceStatus{}
	case *corev1.ResourceQuota:
		if isSet(&o.Status) {
			o.Status = corev1.ResourceQuotaStatus{}
			return []string{"dropped the status the client sent: a quota's usage is counted by the API server (resourcequota strategy PrepareForCreate)"}
		}
	}
	return nil
}

// isSet reports whether a status is set at all.
func isSet[T any](status *T) bool {
	var zero T
	return !equality.Semantic.DeepEqual(*status, zero)
}
