package apiserver

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// twoNodes is a state directory with two registered nodes, node-1 and
// node-2, each by its own kubelet identity, and a pod bound to each: web
// on node-1, db on node-2. It returns the server and admin's copies of the
// pods and nodes.
func twoNodes(t *testing.T) (s *Server, web, db *corev1.Pod, node2 *corev1.Node) {
	t.Helper()
	dir := t.TempDir()
	if _, err := Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := AddNodeUser(dir, "node-2"); err != nil {
		t.Fatal(err)
	}
	s, err := openTestServer(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, n := range []string{"node-1", "node-2"} {
		// each kubelet registers its own Node
		mustCreate(t, as(t, s, "system:node:"+n), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}})
	}
	admin := as(t, s, "admin")
	for name, node := range map[string]string{"web": "node-1", "db": "node-2"} {
		mustCreate(t, admin, testPod(name))
		if err := as(t, s, "system:kube-scheduler").Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(resource, ns, name string) Object {
		obj, err := admin.Get(ctx(t), resource, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	return s, get("pods", "default", "web").(*corev1.Pod), get("pods", "default", "db").(*corev1.Pod), get("nodes", "", "node-2").(*corev1.Node)
}

// TestNodeCannotActOnAnotherNode: node-1's kubelet, through the client, is
// refused everything about node-2's pods and Node, with kube-apiserver's
// texts, and the store keeps them unchanged.
func TestNodeCannotActOnAnotherNode(t *testing.T) {
	s, _, db, node2 := twoNodes(t)
	node1 := as(t, s, "system:node:node-1")
	zero := int64(0)
	ordinary := testPod("sneaky")
	ordinary.Spec.NodeName = "node-1"
	dbStatus := db.DeepCopy()
	dbStatus.Status.Phase = corev1.PodFailed
	node2Taken := node2.DeepCopy()
	node2Taken.Spec.Unschedulable = true
	node2Status := node2.DeepCopy()
	node2Status.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	// node-2's heartbeat, written by node-2
	lease2 := mustCreate(t, as(t, s, "system:node:node-2"), nodeLease("node-2")).(*coordinationv1.Lease)
	lease2.Spec.RenewTime = &metav1.MicroTime{Time: lease2.CreationTimestamp.Time}
	inDefault := nodeLease("node-1")
	inDefault.Namespace = "default"

	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{"delete node-2's pod", func() error {
			_, err := node1.Delete(ctx(t), "pods", "default", "db", DeleteOptions{GracePeriodSeconds: &zero})
			return err
		}, `pods "db" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`},
		{"create an ordinary pod", func() error { _, err := node1.Create(ctx(t), ordinary); return err },
			`pods "sneaky" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`},
		{"update the status of node-2's pod", func() error { _, err := node1.UpdateStatus(ctx(t), dbStatus); return err },
			`pods "db" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set to itself`},
		{"update node-2's Node", func() error { _, err := node1.Update(ctx(t), node2Taken); return err },
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"update node-2's Node status", func() error { _, err := node1.UpdateStatus(ctx(t), node2Status); return err },
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"register as node-2", func() error {
			_, err := node1.Create(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-3"}})
			return err
		}, `nodes "node-3" is forbidden: node "node-1" is not allowed to modify node "node-3"`},
		{"get node-2's pod", func() error { _, err := node1.Get(ctx(t), "pods", "default", "db"); return err },
			`pods "db" is forbidden: User "system:node:node-1" cannot get resource "pods" in API group "" in the namespace "default": no relationship found between node 'node-1' and this object`},
		{"get node-2's Node", func() error { _, err := node1.Get(ctx(t), "nodes", "", "node-2"); return err },
			`nodes "node-2" is forbidden: User "system:node:node-1" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`},
		{"list all Nodes", func() error { _, err := node1.List(ctx(t), "nodes", "", ListOptions{}); return err },
			`nodes is forbidden: User "system:node:node-1" cannot list resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read all nodes, only its own Node object`},
		{"list all pods", func() error { _, err := node1.List(ctx(t), "pods", "", ListOptions{}); return err },
			`pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`},
		{"list node-2's pods", func() error {
			_, err := node1.List(ctx(t), "pods", "", ListOptions{FieldSelector: "spec.nodeName=node-2"})
			return err
		}, `pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`},
		{"watch all pods in default", func() error { _, err := node1.Watch(ctx(t), "pods", "default", ListOptions{}); return err },
			`pods is forbidden: User "system:node:node-1" cannot watch resource "pods" in API group "" in the namespace "default": can only list/watch pods with spec.nodeName field selector`},
		{"update node-2's pod's spec", func() error {
			p := db.DeepCopy()
			p.Labels["owned"] = "yes"
			_, err := node1.Update(ctx(t), p)
			return err
		}, `pods "db" is forbidden: User "system:node:node-1" cannot update resource "pods" in API group "" in the namespace "default"`},
		{"create node-2's Lease", func() error { _, err := node1.Create(ctx(t), nodeLease("node-2")); return err },
			`leases.coordination.k8s.io "node-2" is forbidden: can only access node lease with the same name as the requesting node`},
		{"renew node-2's Lease", func() error { _, err := node1.Update(ctx(t), lease2); return err },
			`leases.coordination.k8s.io "node-2" is forbidden: User "system:node:node-1" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{"get node-2's Lease", func() error { _, err := node1.Get(ctx(t), "leases", corev1.NamespaceNodeLease, "node-2"); return err },
			`leases.coordination.k8s.io "node-2" is forbidden: User "system:node:node-1" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{"create its Lease outside kube-node-lease", func() error { _, err := node1.Create(ctx(t), inDefault); return err },
			`leases.coordination.k8s.io is forbidden: User "system:node:node-1" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "default": can only access leases in the "kube-node-lease" system namespace`},
		{"bind a pod to itself", func() error {
			return node1.Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}})
		}, `pods/binding "db" is forbidden: User "system:node:node-1" cannot create resource "pods/binding" in API group "" in the namespace "default"`},
	}
	before := revision(t, s)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if !apierrors.IsForbidden(err) {
				t.Fatalf("err = %v, want 403 Forbidden", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
	if after := revision(t, s); after != before {
		t.Errorf("the store moved from revision %d to %d: a refused request wrote", before, after)
	}
}

// TestNodeDoesItsOwnWork: what a kubelet needs for its own node is still
// allowed, by the Node authorizer (the -v narration says so) and not by
// RBAC.
func TestNodeDoesItsOwnWork(t *testing.T) {
	s, web, _, _ := twoNodes(t)
	var phases []Phase
	node1 := as(t, s, "system:node:node-1", WithPhases(func(p Phase) { phases = append(phases, p) }))

	l, err := node1.List(ctx(t), "pods", "", ListOptions{FieldSelector: "spec.nodeName=node-1"})
	if err != nil {
		t.Fatalf("listing its pods: %v", err)
	}
	if len(l.Items) != 1 || l.Items[0].GetName() != "web" {
		t.Errorf("listed %d pods, want only web", len(l.Items))
	}
	if _, err := node1.Watch(ctx(t), "pods", "", ListOptions{FieldSelector: "spec.nodeName=node-1", ResourceVersion: l.ResourceVersion}); err != nil {
		t.Fatalf("watching its pods: %v", err)
	}
	if _, err := node1.Get(ctx(t), "pods", "default", "web"); err != nil {
		t.Fatalf("reading its pod: %v", err)
	}
	obj, err := node1.Get(ctx(t), "nodes", "", "node-1")
	if err != nil {
		t.Fatalf("reading its Node: %v", err)
	}
	n := obj.(*corev1.Node)
	n.Labels["kubernetes.io/os"] = "linux"
	if obj, err = node1.Update(ctx(t), n); err != nil {
		t.Fatalf("labelling its Node: %v", err)
	}
	n = obj.(*corev1.Node)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := node1.UpdateStatus(ctx(t), n); err != nil {
		t.Fatalf("posting its Node's status: %v", err)
	}
	// its heartbeat: create, then renew, its own Lease
	lobj, err := node1.Create(ctx(t), nodeLease("node-1"))
	if err != nil {
		t.Fatalf("creating its Lease: %v", err)
	}
	lease := lobj.(*coordinationv1.Lease)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: lease.CreationTimestamp.Add(10e9)}
	if _, err := node1.Update(ctx(t), lease); err != nil {
		t.Fatalf("renewing its Lease: %v", err)
	}
	p := web.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	if _, err := node1.UpdateStatus(ctx(t), p); err != nil {
		t.Fatalf("posting its pod's status: %v", err)
	}
	rec := NewRecorder(node1, "kubelet", "node-1")
	if err := rec.Event(ctx(t), web, corev1.EventTypeNormal, "Started", "Started container web"); err != nil {
		t.Fatalf("recording an event: %v", err)
	}
	mirror := testPod("static-web")
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	mirror.Spec.NodeName = "node-1"
	mirror.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: n.UID, Controller: ptrTo(true)}}
	if _, err := node1.Create(ctx(t), mirror); err != nil {
		t.Fatalf("creating a mirror pod of itself: %v", err)
	}
	// the pods of a deleted namespace: the kubelet removes its own pods
	zero := int64(0)
	if _, err := node1.Delete(ctx(t), "pods", "default", "web", DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting its pod: %v", err)
	}
	// the pod is gone: the Node authorizer no longer relates it to node-1
	if _, err := node1.Get(ctx(t), "pods", "default", "web"); !apierrors.IsForbidden(err) {
		t.Errorf("reading its deleted pod: %v, want 403 (no relationship), as kube-apiserver answers", err)
	}

	var authz []string
	for _, p := range phases {
		if p.Name == PhaseAuthorization && p.Err == nil {
			authz = append(authz, p.Plugin)
			if p.Plugin != "Node" {
				t.Errorf("authorized by %s, want Node: %s", p.Plugin, p.Summary)
			}
		}
		if p.Plugin == "NodeRestriction" && p.Err == nil && p.Summary == "" {
			t.Error("NodeRestriction admitted without saying why")
		}
	}
	if len(authz) < 10 {
		t.Errorf("%d authorization phases reported, want one per request", len(authz))
	}
	found := false
	for _, p := range phases {
		if p.Name == PhaseAuthorization && strings.Contains(p.Summary, `node "node-1" may list pods with field selector spec.nodeName=node-1`) {
			found = true
		}
	}
	if !found {
		t.Error("no authorization phase says the Node authorizer allowed listing with the field selector")
	}
}

// TestNodeAccess: can-i answers for a node as the authorizers decide.
func TestNodeAccess(t *testing.T) {
	s, _, _, _ := twoNodes(t)
	node1 := as(t, s, "system:node:node-1")
	tests := []struct {
		verb, resource, sub, ns, name string
		allowed                       bool
		reason                        string
	}{
		{"get", "pods", "", "default", "web", true, `Node: node "node-1" may get pods "web" in namespace "default"`},
		{"get", "pods", "", "default", "db", false, "Node: no relationship found between node 'node-1' and this object"},
		{"list", "pods", "", "", "", false, "Node: can only list/watch pods with spec.nodeName field selector"},
		{"get", "nodes", "", "", "node-1", true, `Node: node "node-1" may get nodes "node-1"`},
		{"create", "deployments", "", "default", "", false, "no RBAC policy matched"},
	}
	for _, tt := range tests {
		_, d, err := node1.Access(ctx(t), tt.verb, tt.resource, tt.sub, tt.ns, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != tt.allowed || !strings.HasPrefix(d.Reason, tt.reason) {
			t.Errorf("can-i %s %s %s/%s = %v (%s), want %v (%s...)", tt.verb, tt.resource, tt.ns, tt.name, d.Allowed, d.Reason, tt.allowed, tt.reason)
		}
	}
}

// nodeLease is the heartbeat Lease a kubelet keeps for its node.
func nodeLease(node string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: ptrTo(int32(40))},
	}
}
