package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// Operation is what a write does, in admission's words.
type Operation string

// The operations admission plugins see.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// MirrorPodAnnotation marks a mirror pod: the API server's copy of a static
// pod, which a kubelet runs from a file on its node and posts so that the
// cluster can see it. It is the only pod a node may create.
const MirrorPodAnnotation = corev1.MirrorPodAnnotationKey

// NodeRequest is a write as the NodeRestriction plugin sees it.
type NodeRequest struct {
	User        authn.User
	Operation   Operation
	Resource    schema.GroupResource
	Subresource string
	Namespace   string
	// Name is the object's name (on create, the new object's).
	Name string
	// Object is the object to store (create, update); OldObject the one
	// stored (update, delete).
	Object, OldObject runtime.Object
	// Node reads the requesting node's Node object, nil when there is
	// none: a mirror pod's owner reference must carry its uid.
	Node func(name string) (*corev1.Node, error)
}

// NodeRestriction is kube-apiserver's NodeRestriction admission plugin
// (plugin/pkg/admission/noderestriction): it limits what a kubelet writes
// to its own objects, where the Node authorizer could only look at the
// request, not at the object. A node may create only mirror pods bound to
// itself and owned by its Node, delete only pods bound to it, update the
// status only of pods bound to it, and create or update only its own Node,
// without changing its taints, its owner references or the labels kept
// from kubelets (node-restriction.kubernetes.io/, and kubernetes.io or
// k8s.io labels a kubelet does not set). Requests from anyone but a node
// pass untouched. A refusal is 403 Forbidden with the plugin's own text.
func NodeRestriction(r NodeRequest) ([]string, error) {
	node, isNode := authn.NodeIdentity(r.User)
	if !isNode {
		return nil, nil
	}
	if node == "" {
		return nil, r.forbidden(fmt.Errorf("could not determine node from user %q", r.User.Name))
	}
	switch r.Resource {
	case schema.GroupResource{Resource: "pods"}:
		switch r.Subresource {
		case "":
			return r.pod(node)
		case "status":
			return r.podStatus(node)
		case "eviction":
			return r.podEviction(node)
		default:
			return nil, r.forbidden(fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", r.Subresource))
		}
	case schema.GroupResource{Resource: "nodes"}:
		return r.node(node)
	case schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}:
		return r.lease(node)
	}
	return nil, nil
}

// forbidden is admission.NewForbidden: `pods "web" is forbidden: <err>`.
func (r *NodeRequest) forbidden(err error) error {
	name := r.Name
	if name == "" && r.Object != nil {
		if m, merr := apimeta.Accessor(r.Object); merr == nil {
			name = m.GetName()
		}
	}
	if name == "" {
		name = "Unknown"
	}
	return apierrors.NewForbidden(r.Resource, name, err)
}

func (r *NodeRequest) pod(node string) ([]string, error) {
	switch r.Operation {
	case Create:
		return r.mirrorPod(node)
	case Delete:
		existing, ok := r.OldObject.(*corev1.Pod)
		if !ok {
			return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.OldObject))
		}
		if existing.Spec.NodeName != node {
			return nil, r.forbidden(fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", node))
		}
		return []string{fmt.Sprintf("node %q deletes pod %s, bound to itself", node, existing.Name)}, nil
	default:
		return nil, r.forbidden(fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", r.Operation, node))
	}
}

func (r *NodeRequest) mirrorPod(node string) ([]string, error) {
	pod, ok := r.Object.(*corev1.Pod)
	if !ok {
		return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.Object))
	}
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; !mirror {
		return nil, r.forbidden(fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", MirrorPodAnnotation, node))
	}
	if pod.Spec.NodeName != node {
		return nil, r.forbidden(fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", node))
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return nil, r.forbidden(fmt.Errorf("node %q can only create pods with an owner reference set to itself", node))
	case 1:
	default:
		return nil, r.forbidden(fmt.Errorf("node %q can only create pods with a single owner reference set to itself", node))
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != corev1.SchemeGroupVersion.String() || owner.Kind != "Node" || owner.Name != node {
		return nil, r.forbidden(fmt.Errorf("node %q can only create pods with an owner reference set to itself", node))
	}
	if owner.Controller == nil || !*owner.Controller {
		return nil, r.forbidden(fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", node))
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return nil, r.forbidden(fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", node))
	}
	var n *corev1.Node
	if r.Node != nil {
		var err error
		if n, err = r.Node(node); err != nil {
			return nil, r.forbidden(fmt.Errorf("error looking up node %s to verify uid: %v", node, err))
		}
	}
	if n == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, node)
	}
	if owner.UID != n.UID {
		return nil, r.forbidden(fmt.Errorf("node %s UID mismatch: expected %s got %s", node, owner.UID, n.UID))
	}
	if what := apiObjectReference(pod); what != "" {
		return nil, r.forbidden(fmt.Errorf("node %q can not create pods that reference %s", node, what))
	}
	return []string{fmt.Sprintf("node %q creates mirror pod %s, bound to itself and owned by its Node", node, pod.Name)}, nil
}

// apiObjectReference names the first kind of API object pod refers to, as
// Kubernetes' podutil.HasAPIObjectReference: a mirror pod comes from a
// file on the node and may refer to nothing the node could not read.
func apiObjectReference(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts"
	}
	if len(pod.Spec.ImagePullSecrets) > 0 || envRefers(pod, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil },
		func(v *corev1.EnvVarSource) bool { return v.SecretKeyRef != nil }) {
		return "secrets"
	}
	if envRefers(pod, func(e corev1.EnvFromSource) bool { return e.ConfigMapRef != nil },
		func(v *corev1.EnvVarSource) bool { return v.ConfigMapKeyRef != nil }) {
		return "configmaps"
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "resourceclaims"
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			return "configmaps (via configmap volumes)"
		case v.Secret != nil:
			return "secrets (via secret volumes)"
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)"
		case v.Glusterfs != nil:
			return "endpoints (via glusterFS volumes)"
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims"
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)"
		case v.AzureFile != nil:
			return "secrets (via azureFile volumes)"
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					return "configmaps (via projected volumes)"
				case s.Secret != nil:
					return "secrets (via projected volumes)"
				case s.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)"
				case s.ClusterTrustBundle != nil:
					return "clustertrustbundles"
				case s.PodCertificate != nil:
					return "podcertificates"
				}
			}
		}
	}
	return ""
}

// envRefers reports whether a container of pod takes its environment from
// what from or value picks out.
func envRefers(pod *corev1.Pod, from func(corev1.EnvFromSource) bool, value func(*corev1.EnvVarSource) bool) bool {
	check := func(envFrom []corev1.EnvFromSource, env []corev1.EnvVar) bool {
		return slices.ContainsFunc(envFrom, from) ||
			slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.ValueFrom != nil && value(e.ValueFrom) })
	}
	for _, c := range pod.Spec.InitContainers {
		if check(c.EnvFrom, c.Env) {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if check(c.EnvFrom, c.Env) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if check(c.EnvFrom, c.Env) {
			return true
		}
	}
	return false
}

func (r *NodeRequest) podStatus(node string) ([]string, error) {
	if r.Operation != Update {
		return nil, r.forbidden(fmt.Errorf("unexpected operation %q", r.Operation))
	}
	old, ok := r.OldObject.(*corev1.Pod)
	if !ok {
		return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.OldObject))
	}
	if old.Spec.NodeName != node {
		return nil, r.forbidden(fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", node))
	}
	pod, ok := r.Object.(*corev1.Pod)
	if !ok {
		return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.Object))
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return nil, r.forbidden(fmt.Errorf("node %q cannot update labels through pod status", node))
	}
	if !apiequality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return nil, r.forbidden(fmt.Errorf("node %q cannot update resource claim statues", node))
	}
	return []string{fmt.Sprintf("node %q updates the status of pod %s, bound to itself", node, old.Name)}, nil
}

func (r *NodeRequest) podEviction(node string) ([]string, error) {
	if r.Operation != Create {
		return nil, r.forbidden(fmt.Errorf("unexpected operation %s", r.Operation))
	}
	pod, ok := r.OldObject.(*corev1.Pod)
	if !ok {
		return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.OldObject))
	}
	if pod.Spec.NodeName != node {
		return nil, r.forbidden(fmt.Errorf("node %s can only evict pods with spec.nodeName set to itself", node))
	}
	return []string{fmt.Sprintf("node %q evicts pod %s, bound to itself", node, pod.Name)}, nil
}

func (r *NodeRequest) node(node string) ([]string, error) {
	if r.Name != node {
		return nil, r.forbidden(fmt.Errorf("node %q is not allowed to modify node %q", node, r.Name))
	}
	switch r.Operation {
	case Create:
		n, ok := r.Object.(*corev1.Node)
		if !ok {
			return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.Object))
		}
		if n.Spec.ConfigSource != nil {
			return nil, r.forbidden(fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", node))
		}
		if bad := forbiddenNodeLabels(modifiedLabels(n.Labels, nil)); len(bad) > 0 {
			return nil, r.forbidden(fmt.Errorf("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", ")))
		}
	case Update:
		n, ok := r.Object.(*corev1.Node)
		if !ok {
			return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.Object))
		}
		old, ok := r.OldObject.(*corev1.Node)
		if !ok {
			return nil, r.forbidden(fmt.Errorf("unexpected type %T", r.Object))
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return nil, r.forbidden(fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", node))
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return nil, r.forbidden(fmt.Errorf("node %q is not allowed to modify taints", node))
		}
		if !apiequality.Semantic.DeepEqual(n.OwnerReferences, old.OwnerReferences) {
			return nil, r.forbidden(fmt.Errorf("node %q is not allowed to modify ownerReferences", node))
		}
		if bad := forbiddenNodeLabels(modifiedLabels(n.Labels, old.Labels)); len(bad) > 0 {
			return nil, r.forbidden(fmt.Errorf("is not allowed to modify labels: %s", strings.Join(bad, ", ")))
		}
	}
	return []string{fmt.Sprintf("node %q writes its own Node", node)}, nil
}

func (r *NodeRequest) lease(node string) ([]string, error) {
	if r.Namespace != corev1.NamespaceNodeLease {
		return nil, r.forbidden(fmt.Errorf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
	}
	if r.Name != node {
		return nil, r.forbidden(fmt.Errorf("can only access node lease with the same name as the requesting node"))
	}
	return []string{fmt.Sprintf("node %q writes its own Lease", node)}, nil
}

// modifiedLabels returns, sorted, the keys whose values differ between a
// and b.
func modifiedLabels(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			keys = append(keys, k)
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || v != w {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// kubeletLabels are the kubernetes.io labels a kubelet sets on its own Node
// (k8s.io/kubelet/pkg/apis.KubeletLabels); kubeletLabelNamespaces are the
// label namespaces it may use freely.
var (
	kubeletLabels = []string{
		corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
		corev1.LabelOSStable, corev1.LabelArchStable,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	}
	kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}
)

// forbiddenNodeLabels returns the labels of keys a node may not add,
// change or remove on its own Node: those under
// node-restriction.kubernetes.io/, which administrators use to steer
// workloads to nodes they trust, and kubernetes.io or k8s.io labels that
// are not a kubelet's own.
func forbiddenNodeLabels(keys []string) []string {
	var bad []string
	for _, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		if !strings.Contains(k, "/") {
			ns = ""
		}
		if inNamespace(ns, corev1.LabelNamespaceNodeRestriction) ||
			(isKubernetesLabel(ns) && !isKubeletLabel(k, ns)) {
			bad = append(bad, k)
		}
	}
	return bad
}

func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}

func isKubernetesLabel(ns string) bool {
	return inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")
}

func isKubeletLabel(key, ns string) bool {
	return slices.Contains(kubeletLabels, key) || slices.ContainsFunc(kubeletLabelNamespaces, func(d string) bool { return inNamespace(ns, d) })
}
