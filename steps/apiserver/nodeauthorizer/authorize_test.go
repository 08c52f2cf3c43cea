package nodeauthorizer

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
)

// podList is the narrow Pods interface over a fixed list.
type podList []*corev1.Pod

func (l podList) Get(namespace, name string) (*corev1.Pod, error) {
	for _, p := range l {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}

func (l podList) List(namespace string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range l {
		if p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out, nil
}

func pod(name, node string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

var (
	node1   = authn.User{Name: "system:node:node-1", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	admin   = authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}
	notNode = authn.User{Name: "system:node:node-1", Groups: []string{authn.GroupAuthenticated}}
	noName  = authn.User{Name: "system:node:", Groups: []string{authn.GroupNodes}}

	cluster = podList{
		pod("web", "node-1", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "web-data"}}},
			}
			s.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-secret"}, Key: "password"}}}}
			s.ServiceAccountName = "web-sa"
		}),
		pod("db", "node-2", func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-secret"}}}}
			s.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db-config"}}}}}}}}
		}),
		pod("pending", ""),
	}
)

func nodeSelector(node string) fields.Requirements {
	return fields.OneTermEqualSelector("spec.nodeName", node).Requirements()
}

// TestAuthorize: each verb and resource a kubelet asks for, allowed or
// not, with the reason kube-apiserver's Node authorizer gives.
func TestAuthorize(t *testing.T) {
	z := New(rbac.NodeRules())
	tests := []struct {
		name   string
		a      rbac.Attributes
		allow  bool
		reason string // the reason of a refusal ("" for none)
	}{
		// nodes
		{"get own Node", rbac.Attributes{Verb: "get", Resource: "nodes", Name: "node-1"}, true, ""},
		{"get another Node", rbac.Attributes{Verb: "get", Resource: "nodes", Name: "node-2"}, false, "node 'node-1' cannot read 'node-2', only its own Node object"},
		{"list all Nodes", rbac.Attributes{Verb: "list", Resource: "nodes"}, false, "node 'node-1' cannot read all nodes, only its own Node object"},
		{"watch all Nodes", rbac.Attributes{Verb: "watch", Resource: "nodes"}, false, "node 'node-1' cannot read all nodes, only its own Node object"},
		{"create a Node (NodeRestriction checks the name)", rbac.Attributes{Verb: "create", Resource: "nodes", Name: "node-1"}, true, ""},
		{"update a Node (NodeRestriction checks the name)", rbac.Attributes{Verb: "update", Resource: "nodes", Name: "node-2"}, true, ""},
		{"update nodes/status (NodeRestriction checks the name)", rbac.Attributes{Verb: "update", Resource: "nodes", Subresource: "status", Name: "node-1"}, true, ""},
		{"delete a Node", rbac.Attributes{Verb: "delete", Resource: "nodes", Name: "node-1"}, false, ""},
		{"get nodes/status", rbac.Attributes{Verb: "get", Resource: "nodes", Subresource: "status", Name: "node-1"}, false, ""},

		// pods
		{"get a pod bound to it", rbac.Attributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}, true, ""},
		{"get a pod bound to node-2", rbac.Attributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "db"}, false, "no relationship found between node 'node-1' and this object"},
		{"get an unscheduled pod", rbac.Attributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "pending"}, false, "no relationship found between node 'node-1' and this object"},
		{"get a pod that does not exist", rbac.Attributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "gone"}, false, "no relationship found between node 'node-1' and this object"},
		{"get pods/log", rbac.Attributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "web"}, false, ""},
		{"list its pods", rbac.Attributes{Verb: "list", Resource: "pods", FieldSelector: nodeSelector("node-1")}, true, ""},
		{"watch its pods", rbac.Attributes{Verb: "watch", Resource: "pods", FieldSelector: nodeSelector("node-1")}, true, ""},
		{"list its pods in one namespace", rbac.Attributes{Verb: "list", Resource: "pods", Namespace: "default", FieldSelector: nodeSelector("node-1")}, true, ""},
		{"list every pod", rbac.Attributes{Verb: "list", Resource: "pods"}, false, "can only list/watch pods with spec.nodeName field selector"},
		{"watch every pod", rbac.Attributes{Verb: "watch", Resource: "pods"}, false, "can only list/watch pods with spec.nodeName field selector"},
		{"list node-2's pods", rbac.Attributes{Verb: "list", Resource: "pods", FieldSelector: nodeSelector("node-2")}, false, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods not on it", rbac.Attributes{Verb: "list", Resource: "pods", FieldSelector: fields.ParseSelectorOrDie("spec.nodeName!=node-1").Requirements()}, false, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods by name only", rbac.Attributes{Verb: "list", Resource: "pods", FieldSelector: fields.OneTermEqualSelector("metadata.name", "db").Requirements()}, false, "can only list/watch pods with spec.nodeName field selector"},
		{"create a pod (NodeRestriction: mirror pods only)", rbac.Attributes{Verb: "create", Resource: "pods", Namespace: "default"}, true, ""},
		{"delete a pod (NodeRestriction: its own only)", rbac.Attributes{Verb: "delete", Resource: "pods", Namespace: "default", Name: "db"}, true, ""},
		{"update a pod", rbac.Attributes{Verb: "update", Resource: "pods", Namespace: "default", Name: "web"}, false, ""},
		{"update pods/status (NodeRestriction: its own only)", rbac.Attributes{Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "db"}, true, ""},
		{"create pods/eviction", rbac.Attributes{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "default", Name: "web"}, true, ""},
		{"create pods/binding", rbac.Attributes{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "pending"}, false, ""},

		// secrets, config maps, claims, service accounts: only what its pods use
		{"get a secret its pod uses", rbac.Attributes{Verb: "get", Resource: "secrets", Namespace: "default", Name: "web-secret"}, true, ""},
		{"watch a secret its pod uses", rbac.Attributes{Verb: "watch", Resource: "secrets", Namespace: "default", Name: "web-secret"}, true, ""},
		{"get node-2's pod's secret", rbac.Attributes{Verb: "get", Resource: "secrets", Namespace: "default", Name: "db-secret"}, false, "no relationship found between node 'node-1' and this object"},
		{"list every secret", rbac.Attributes{Verb: "list", Resource: "secrets", Namespace: "default"}, false, "No Object name found"},
		{"list secrets across namespaces", rbac.Attributes{Verb: "list", Resource: "secrets"}, false, "can only read namespaced object of this type"},
		{"create a secret", rbac.Attributes{Verb: "create", Resource: "secrets", Namespace: "default"}, false, "can only read resources of this type"},
		{"get a config map its pod uses", rbac.Attributes{Verb: "get", Resource: "configmaps", Namespace: "default", Name: "web-config"}, true, ""},
		{"get node-2's pod's config map", rbac.Attributes{Verb: "get", Resource: "configmaps", Namespace: "default", Name: "db-config"}, false, "no relationship found between node 'node-1' and this object"},
		{"get a claim its pod uses", rbac.Attributes{Verb: "get", Resource: "persistentvolumeclaims", Namespace: "default", Name: "web-data"}, true, ""},
		{"list claims", rbac.Attributes{Verb: "list", Resource: "persistentvolumeclaims", Namespace: "default"}, false, "can only get individual resources of this type"},
		{"update its claim's status", rbac.Attributes{Verb: "update", Resource: "persistentvolumeclaims", Subresource: "status", Namespace: "default", Name: "web-data"}, true, ""},
		{"get a persistent volume", rbac.Attributes{Verb: "get", Resource: "persistentvolumes", Name: "pv-1"}, false, "no relationship found between node 'node-1' and this object"},
		{"token for its pod's service account", rbac.Attributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "default", Name: "web-sa"}, true, ""},
		{"token for another service account", rbac.Attributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "default", Name: "default"}, false, "no relationship found between node 'node-1' and this object"},
		{"get a service account", rbac.Attributes{Verb: "get", Resource: "serviceaccounts", Namespace: "default", Name: "web-sa"}, false, "can only create tokens for individual service accounts"},

		// leases
		{"update its own Lease", rbac.Attributes{Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "node-1"}, true, ""},
		{"create a Lease (NodeRestriction checks the name)", rbac.Attributes{Verb: "create", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease"}, true, ""},
		{"update node-2's Lease", rbac.Attributes{Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "node-2"}, false, "can only access node lease with the same name as the requesting node"},
		{"a Lease in another namespace", rbac.Attributes{Verb: "get", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "node-1"}, false, `can only access leases in the "kube-node-lease" system namespace`},
		{"list Leases", rbac.Attributes{Verb: "list", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease"}, false, "can only get, create, update, patch, or delete a node lease"},

		// the static rules of system:node
		{"create an Event", rbac.Attributes{Verb: "create", Resource: "events", Namespace: "default"}, true, ""},
		{"create an events.k8s.io Event", rbac.Attributes{Verb: "create", APIGroup: "events.k8s.io", Resource: "events", Namespace: "default"}, true, ""},
		{"list services", rbac.Attributes{Verb: "list", Resource: "services"}, true, ""},
		{"delete an Event", rbac.Attributes{Verb: "delete", Resource: "events", Namespace: "default", Name: "x"}, false, ""},
		{"create a Deployment", rbac.Attributes{Verb: "create", APIGroup: "apps", Resource: "deployments", Namespace: "default"}, false, ""},
		{"read a namespace", rbac.Attributes{Verb: "get", Resource: "namespaces", Name: "default"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.a.User = node1
			d, err := z.Authorize(cluster, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.allow {
				t.Fatalf("allowed = %v, want %v (reason %q)", d.Allowed, tt.allow, d.Reason)
			}
			if !tt.allow && d.Reason != tt.reason {
				t.Errorf("reason = %q\nwant     %q", d.Reason, tt.reason)
			}
		})
	}
}

// TestAuthorize_NotANode: the Node authorizer has no opinion, and no
// reason, about anyone but a node: RBAC decides alone.
func TestAuthorize_NotANode(t *testing.T) {
	z := New(rbac.NodeRules())
	for _, u := range []authn.User{admin, notNode} {
		d, err := z.Authorize(cluster, rbac.Attributes{User: u, Verb: "get", Resource: "nodes", Name: "node-1"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.Reason != "" {
			t.Errorf("user %q (groups %v): %+v, want no opinion and no reason", u.Name, u.Groups, d)
		}
	}
}

// TestAuthorize_BadInput: requests the Node authorizer refuses whatever
// they ask.
func TestAuthorize_BadInput(t *testing.T) {
	z := New(rbac.NodeRules())
	tests := []struct {
		name   string
		pods   Pods
		a      rbac.Attributes
		reason string
		err    bool
	}{
		{"a node user without a node name", cluster, rbac.Attributes{User: noName, Verb: "get", Resource: "nodes", Name: "node-1"}, `unknown node for user "system:node:"`, false},
		{"a get without a name", cluster, rbac.Attributes{User: node1, Verb: "get", Resource: "pods", Namespace: "default"}, "No Object name found", false},
		{"reading pods fails", failingPods{}, rbac.Attributes{User: node1, Verb: "get", Resource: "secrets", Namespace: "default", Name: "x"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := z.Authorize(tt.pods, tt.a)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error: %v", err, tt.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "node authorizer: listing the pods") {
					t.Errorf("error %q does not say what was being done", err)
				}
				return
			}
			if d.Allowed || d.Reason != tt.reason {
				t.Errorf("%+v, want refused with %q", d, tt.reason)
			}
		})
	}
}

type failingPods struct{}

func (failingPods) Get(string, string) (*corev1.Pod, error) { return nil, errors.New("disk on fire") }
func (failingPods) List(string) ([]*corev1.Pod, error)      { return nil, errors.New("disk on fire") }
