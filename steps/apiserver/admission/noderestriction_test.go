package admission

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

var (
	nodeOne   = authn.User{Name: "system:node:node-1", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	podsGR    = schema.GroupResource{Resource: "pods"}
	nodesGR   = schema.GroupResource{Resource: "nodes"}
	leasesGR  = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	node1UID  = types.UID("uid-of-node-1")
	nodeOneFn = func(name string) (*corev1.Node, error) {
		if name != "node-1" {
			return nil, nil
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: node1UID}}, nil
	}
)

// boundPod is a pod bound to node, with mutations applied.
func boundPod(name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := newPod(name, ctr("c", "busybox"))
	p.Spec.NodeName = node
	for _, m := range mutate {
		m(p)
	}
	return p
}

// mirror makes p a mirror pod of node-1, owned by its Node.
func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{MirrorPodAnnotation: "hash"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: node1UID, Controller: ptr(true)}}
}

func testNode(name string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, m := range mutate {
		m(n)
	}
	return n
}

// TestNodeRestriction: what a node may write, and the plugin's refusals in
// kube-apiserver's words.
func TestNodeRestriction(t *testing.T) {
	tests := []struct {
		name string
		req  NodeRequest
		want string // "" when admitted; else the whole 403 message
	}{
		// pods
		{"create a mirror pod bound to itself", NodeRequest{Operation: Create, Resource: podsGR, Name: "static-web", Object: boundPod("static-web", "node-1", mirror)}, ""},
		{"create an ordinary pod", NodeRequest{Operation: Create, Resource: podsGR, Name: "web", Object: boundPod("web", "node-1")},
			`pods "web" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`},
		{"create a mirror pod bound to node-2", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-2", mirror)},
			`pods "m" is forbidden: node "node-1" can only create pods with spec.nodeName set to itself`},
		{"create a mirror pod without an owner", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) { p.OwnerReferences = nil })},
			`pods "m" is forbidden: node "node-1" can only create pods with an owner reference set to itself`},
		{"create a mirror pod owned by node-2", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) { p.OwnerReferences[0].Name = "node-2" })},
			`pods "m" is forbidden: node "node-1" can only create pods with an owner reference set to itself`},
		{"create a mirror pod owned by a stale node uid", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) { p.OwnerReferences[0].UID = "old" })},
			`pods "m" is forbidden: node node-1 UID mismatch: expected old got uid-of-node-1`},
		{"create a mirror pod that is not controlled", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil })},
			`pods "m" is forbidden: node "node-1" can only create pods with a controller owner reference set to itself`},
		{"create a mirror pod reading a secret", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-password"}}}}
		})}, `pods "m" is forbidden: node "node-1" can not create pods that reference secrets (via secret volumes)`},
		{"create a mirror pod with a service account", NodeRequest{Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror, func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" })},
			`pods "m" is forbidden: node "node-1" can not create pods that reference serviceaccounts`},
		{"delete a pod bound to itself", NodeRequest{Operation: Delete, Resource: podsGR, Namespace: "default", Name: "web", OldObject: boundPod("web", "node-1")}, ""},
		{"delete a pod bound to node-2", NodeRequest{Operation: Delete, Resource: podsGR, Namespace: "default", Name: "db", OldObject: boundPod("db", "node-2")},
			`pods "db" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`},
		{"delete an unscheduled pod", NodeRequest{Operation: Delete, Resource: podsGR, Namespace: "default", Name: "new", OldObject: boundPod("new", "")},
			`pods "new" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`},
		{"update a pod's spec", NodeRequest{Operation: Update, Resource: podsGR, Namespace: "default", Name: "web", Object: boundPod("web", "node-1"), OldObject: boundPod("web", "node-1")},
			`pods "web" is forbidden: unexpected operation "UPDATE", node "node-1" can only create and delete mirror pods`},
		{"update the status of its pod", NodeRequest{Operation: Update, Resource: podsGR, Subresource: "status", Namespace: "default", Name: "web", Object: boundPod("web", "node-1"), OldObject: boundPod("web", "node-1")}, ""},
		{"update the status of node-2's pod", NodeRequest{Operation: Update, Resource: podsGR, Subresource: "status", Namespace: "default", Name: "db", Object: boundPod("db", "node-2"), OldObject: boundPod("db", "node-2")},
			`pods "db" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set to itself`},
		{"relabel its pod through status", NodeRequest{Operation: Update, Resource: podsGR, Subresource: "status", Namespace: "default", Name: "web",
			Object: boundPod("web", "node-1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }), OldObject: boundPod("web", "node-1")},
			`pods "web" is forbidden: node "node-1" cannot update labels through pod status`},
		{"bind a pod", NodeRequest{Operation: Create, Resource: podsGR, Subresource: "binding", Namespace: "default", Name: "web"},
			`pods "web" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed`},
		{"evict its pod", NodeRequest{Operation: Create, Resource: podsGR, Subresource: "eviction", Namespace: "default", Name: "web", OldObject: boundPod("web", "node-1")}, ""},
		{"evict node-2's pod", NodeRequest{Operation: Create, Resource: podsGR, Subresource: "eviction", Namespace: "default", Name: "db", OldObject: boundPod("db", "node-2")},
			`pods "db" is forbidden: node node-1 can only evict pods with spec.nodeName set to itself`},

		// nodes
		{"register itself", NodeRequest{Operation: Create, Resource: nodesGR, Name: "node-1", Object: testNode("node-1")}, ""},
		{"register as node-2", NodeRequest{Operation: Create, Resource: nodesGR, Name: "node-2", Object: testNode("node-2")},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"update node-2", NodeRequest{Operation: Update, Resource: nodesGR, Name: "node-2", Object: testNode("node-2"), OldObject: testNode("node-2")},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"update node-2's status", NodeRequest{Operation: Update, Resource: nodesGR, Subresource: "status", Name: "node-2", Object: testNode("node-2"), OldObject: testNode("node-2")},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"update its own status", NodeRequest{Operation: Update, Resource: nodesGR, Subresource: "status", Name: "node-1", Object: testNode("node-1"), OldObject: testNode("node-1")}, ""},
		{"add a kubelet label", NodeRequest{Operation: Update, Resource: nodesGR, Name: "node-1",
			Object: testNode("node-1", func(n *corev1.Node) {
				n.Labels["kubernetes.io/os"] = "linux"
				n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
			}), OldObject: testNode("node-1")}, ""},
		{"add its own label", NodeRequest{Operation: Update, Resource: nodesGR, Name: "node-1",
			Object: testNode("node-1", func(n *corev1.Node) { n.Labels["disk"] = "ssd" }), OldObject: testNode("node-1")}, ""},
		{"register with a node-restriction label", NodeRequest{Operation: Create, Resource: nodesGR, Name: "node-1",
			Object: testNode("node-1", func(n *corev1.Node) { n.Labels["node-restriction.kubernetes.io/pci"] = "true" })},
			`nodes "node-1" is forbidden: node "node-1" is not allowed to set the following labels: node-restriction.kubernetes.io/pci`},
		{"make itself a control plane node", NodeRequest{Operation: Update, Resource: nodesGR, Name: "node-1",
			Object: testNode("node-1", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" }), OldObject: testNode("node-1")},
			`nodes "node-1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane`},
		{"remove its taints", NodeRequest{Operation: Update, Resource: nodesGR, Name: "node-1", Object: testNode("node-1"),
			OldObject: testNode("node-1", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			})}, `nodes "node-1" is forbidden: node "node-1" is not allowed to modify taints`},

		// leases
		{"create its own Lease", NodeRequest{Operation: Create, Resource: leasesGR, Namespace: "kube-node-lease", Name: "node-1"}, ""},
		{"create node-2's Lease", NodeRequest{Operation: Create, Resource: leasesGR, Namespace: "kube-node-lease", Name: "node-2"},
			`leases.coordination.k8s.io "node-2" is forbidden: can only access node lease with the same name as the requesting node`},
		{"a Lease in kube-system", NodeRequest{Operation: Update, Resource: leasesGR, Namespace: "kube-system", Name: "node-1"},
			`leases.coordination.k8s.io "node-1" is forbidden: can only access leases in the "kube-node-lease" system namespace`},

		// everything else passes: the authorizers decided
		{"create an Event", NodeRequest{Operation: Create, Resource: schema.GroupResource{Resource: "events"}, Namespace: "default", Name: "e"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.User = nodeOne
			tt.req.Node = nodeOneFn
			notes, err := NodeRestriction(tt.req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(notes) == 0 && tt.req.Resource != (schema.GroupResource{Resource: "events"}) {
					t.Error("admitted without a note saying why")
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("err = %v, want 403 Forbidden", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

// TestNodeRestriction_NotANode: the plugin restricts nodes only; a user
// named system:node:x outside system:nodes is not one.
func TestNodeRestriction_NotANode(t *testing.T) {
	for _, u := range []authn.User{
		{Name: "admin", Groups: []string{authn.GroupMasters}},
		{Name: "system:node:node-1", Groups: []string{authn.GroupAuthenticated}},
	} {
		notes, err := NodeRestriction(NodeRequest{User: u, Operation: Delete, Resource: podsGR, Namespace: "default", Name: "db", OldObject: boundPod("db", "node-2")})
		if err != nil || notes != nil {
			t.Errorf("user %q (groups %v): notes %v, err %v; want untouched", u.Name, u.Groups, notes, err)
		}
	}
}

// TestNodeRestriction_BadInput: requests the plugin cannot make sense of
// are refused, saying why.
func TestNodeRestriction_BadInput(t *testing.T) {
	tests := []struct {
		name string
		req  NodeRequest
		want string
		is   func(error) bool
	}{
		{"a node user without a node name", NodeRequest{User: authn.User{Name: "system:node:", Groups: []string{authn.GroupNodes}}, Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "")},
			`pods "m" is forbidden: could not determine node from user "system:node:"`, apierrors.IsForbidden},
		{"a pod create without a pod", NodeRequest{User: nodeOne, Operation: Create, Resource: podsGR, Name: "m", Object: testNode("m")},
			`pods "m" is forbidden: unexpected type *v1.Node`, apierrors.IsForbidden},
		{"a mirror pod of a node not registered", NodeRequest{User: nodeOne, Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror),
			Node: func(string) (*corev1.Node, error) { return nil, nil }}, `nodes "node-1" not found`, apierrors.IsNotFound},
		{"reading the node fails", NodeRequest{User: nodeOne, Operation: Create, Resource: podsGR, Name: "m", Object: boundPod("m", "node-1", mirror),
			Node: func(string) (*corev1.Node, error) { return nil, errors.New("disk on fire") }},
			`pods "m" is forbidden: error looking up node node-1 to verify uid: disk on fire`, apierrors.IsForbidden},
		{"a create naming nothing", NodeRequest{User: nodeOne, Operation: Create, Resource: podsGR, Object: boundPod("", "node-1")},
			`pods "Unknown" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`, apierrors.IsForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NodeRestriction(tt.req)
			if err == nil || !tt.is(err) || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
}
