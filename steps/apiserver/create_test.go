package apiserver

import (
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a create ignores: the status a client sends (kube-apiserver's
// strategies' PrepareForCreate), and the generation.

func TestCreate_StatusIsTheServers(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")

	running := testPod("running")
	running.Generation = 7
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSGuaranteed, PodIP: "10.244.0.9",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	succeeded := testPod("succeeded")
	succeeded.Status.Phase = corev1.PodSucceeded
	burstable := testPod("burstable")
	burstable.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	burstable.Status.QOSClass = corev1.PodQOSBestEffort

	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		wantQOS corev1.PodQOSClass
	}{
		{"faked Running, Ready, Guaranteed and an IP", running, corev1.PodQOSBestEffort},
		{"faked Succeeded", succeeded, corev1.PodQOSBestEffort},
		{"faked qosClass is computed again", burstable, corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustCreate(t, admin, tc.pod)
			got, err := admin.Get(ctx(t), "pods", "default", tc.pod.Name)
			if err != nil {
				t.Fatal(err)
			}
			p := got.(*corev1.Pod)
			want := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: tc.wantQOS}
			if p.Status.Phase != want.Phase || p.Status.QOSClass != want.QOSClass || p.Status.PodIP != "" || len(p.Status.Conditions) != 0 {
				t.Errorf("stored status = %+v, want only phase Pending and qosClass %s", p.Status, tc.wantQOS)
			}
			if p.Generation != 1 {
				t.Errorf("generation = %d, want 1", p.Generation)
			}
		})
	}
}

// A pod created as Succeeded would not count against "pods" (terminal pods
// do not): the strategy's reset makes it count.
func TestCreate_FakedSucceededStillCountsInQuota(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}})
	first := testPod("first")
	first.Status.Phase = corev1.PodSucceeded
	mustCreate(t, admin, first)
	q, err := admin.Get(ctx(t), "resourcequotas", "default", "one")
	if err != nil {
		t.Fatal(err)
	}
	if used := q.(*corev1.ResourceQuota).Status.Used[corev1.ResourcePods]; used.Value() != 1 {
		t.Errorf("quota used pods = %s after a pod faked as Succeeded, want 1", used.String())
	}
	second := testPod("second")
	second.Status.Phase = corev1.PodFailed
	before := revision(t, s)
	_, err = admin.Create(ctx(t), second)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: one, requested: pods=1, used: pods=1, limited: pods=1") {
		t.Fatalf("second pod = %v, want the quota's 403", err)
	}
	if after := revision(t, s); after != before {
		t.Errorf("the store moved from revision %d to %d", before, after)
	}
	// nor can a developer mark the pod finished afterwards: pods/status is
	// the kubelet's
	done := mustGetPod(t, admin, "first")
	done.Status.Phase = corev1.PodSucceeded
	if _, err := as(t, s, "developer").UpdateStatus(ctx(t), done); !apierrors.IsForbidden(err) {
		t.Errorf("developer's UpdateStatus = %v, want 403 Forbidden", err)
	}
}

func mustGetPod(t *testing.T, c *Client, name string) *corev1.Pod {
	t.Helper()
	o, err := c.Get(ctx(t), "pods", "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1.Pod)
}

// A pod created with scheduling gates says why it is not scheduled, as
// kube-apiserver's strategy sets it.
func TestCreate_SchedulingGatedCondition(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	gated := testPod("gated")
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota-check"}}
	mustCreate(t, admin, gated)
	p := mustGetPod(t, admin, "gated")
	if len(p.Status.Conditions) != 1 {
		t.Fatalf("conditions = %+v, want PodScheduled=False", p.Status.Conditions)
	}
	c := p.Status.Conditions[0]
	if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != "SchedulingGated" ||
		c.Message != "Scheduling is blocked due to non-empty scheduling gates" || c.LastTransitionTime.IsZero() {
		t.Errorf("condition = %+v, want PodScheduled False SchedulingGated with kube-apiserver's message and a time", c)
	}
}

func TestCreate_OtherKindsLoseTheirStatus(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	replicas := int32(2)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}}}

	for _, tc := range []struct {
		name     string
		obj      Object
		resource string
		check    func(Object) string // "" when the stored object is right
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 4},
			Spec:   appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel, Template: tpl},
			Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 4}}, "deployments",
			func(o Object) string {
				d := o.(*appsv1.Deployment)
				if toJSON(d.Status) != toJSON(appsv1.DeploymentStatus{}) || d.Generation != 1 {
					return "status " + toJSON(d.Status) + ", generation " + itoa(d.Generation)
				}
				return ""
			}},
		{"replicaset", &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Generation: 4},
			Spec:   appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: tpl},
			Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}, "replicasets",
			func(o Object) string {
				rs := o.(*appsv1.ReplicaSet)
				if toJSON(rs.Status) != toJSON(appsv1.ReplicaSetStatus{}) || rs.Generation != 1 {
					return "status " + toJSON(rs.Status) + ", generation " + itoa(rs.Generation)
				}
				return ""
			}},
		{"namespace faked Terminating", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}, "namespaces",
			func(o Object) string {
				if ns := o.(*corev1.Namespace); ns.Status.Phase != corev1.NamespaceActive || len(ns.Status.Conditions) != 0 {
					return "status " + toJSON(ns.Status)
				}
				return ""
			}},
		{"resourcequota with a faked usage", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"},
			Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
			Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1000")}, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, "resourcequotas",
			func(o Object) string {
				if q := o.(*corev1.ResourceQuota); len(q.Status.Hard)+len(q.Status.Used) != 0 {
					return "status " + toJSON(q.Status)
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustCreate(t, admin, tc.obj)
			got, err := admin.Get(ctx(t), tc.resource, tc.obj.GetNamespace(), tc.obj.GetName())
			if err != nil {
				t.Fatal(err)
			}
			if bad := tc.check(got); bad != "" {
				t.Errorf("stored %s, want the status the API server sets and generation 1", bad)
			}
		})
	}

	// a Node keeps the status it is registered with: the kubelet reports
	// its capacity that way
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-9"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	got := mustCreate(t, admin, node).(*corev1.Node)
	if c := got.Status.Capacity[corev1.ResourceCPU]; c.String() != "2" {
		t.Errorf("node capacity = %q after create, want the registered 2", c.String())
	}
}

// Update never writes a status, for any resource with a status
// subresource: only UpdateStatus does.
func TestUpdate_IgnoresStatusOfEveryResourceWithOne(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	replicas := int32(1)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}}}
	objs := map[string]Object{
		"pods":           testPod("web"),
		"deployments":    &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel, Template: tpl}},
		"replicasets":    &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: tpl}},
		"nodes":          &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-9"}},
		"namespaces":     &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		"resourcequotas": &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}},
	}
	fake := map[string]func(Object){
		"pods":        func(o Object) { o.(*corev1.Pod).Status.Phase = corev1.PodSucceeded },
		"deployments": func(o Object) { o.(*appsv1.Deployment).Status.AvailableReplicas = 5 },
		"replicasets": func(o Object) { o.(*appsv1.ReplicaSet).Status.ReadyReplicas = 5 },
		"nodes": func(o Object) {
			o.(*corev1.Node).Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("999")}
		},
		"namespaces": func(o Object) { o.(*corev1.Namespace).Status.Phase = corev1.NamespaceTerminating },
		"resourcequotas": func(o Object) {
			o.(*corev1.ResourceQuota).Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("-3")}
		},
	}
	for _, r := range Resources() {
		if !r.HasStatus {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			obj, ok := objs[r.Name]
			if !ok {
				t.Fatalf("resource %s has a status subresource and no case here: add one", r.Name)
			}
			stored := mustCreate(t, admin, obj)
			before := toJSON(statusOf(t, stored))
			edited := stored.DeepCopyObject().(Object)
			fake[r.Name](edited)
			edited.SetLabels(map[string]string{"edited": "yes"})
			out, err := admin.Update(ctx(t), edited)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if out.GetLabels()["edited"] != "yes" {
				t.Errorf("the label change was not stored")
			}
			got, err := admin.Get(ctx(t), r.Name, obj.GetNamespace(), obj.GetName())
			if err != nil {
				t.Fatal(err)
			}
			if after := toJSON(statusOf(t, got)); after != before {
				t.Errorf("Update changed the status:\n before %s\n after  %s", before, after)
			}
		})
	}
}

func statusOf(t *testing.T, o Object) any {
	t.Helper()
	m, err := toMap(o)
	if err != nil {
		t.Fatal(err)
	}
	return m["status"]
}

func toJSON(v any) string { return string(mustJSON(v)) }

// What a create refuses: a resourceVersion, as kube-apiserver's storage
// does, with its status (500, no reason) and text.
func TestCreate_ResourceVersionRefused(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	for _, rv := range []string{"5", "123456"} {
		t.Run(rv, func(t *testing.T) {
			p := testPod("saved")
			p.ResourceVersion = rv
			before := revision(t, s)
			_, err := admin.Create(ctx(t), p)
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("Create = %v, want a status error", err)
			}
			st := status.Status()
			if st.Code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonUnknown || st.Message != "resourceVersion should not be set on objects to be created" {
				t.Errorf("status = %d %q %q, want 500, no reason, kube-apiserver's text", st.Code, st.Reason, st.Message)
			}
			if after := revision(t, s); after != before {
				t.Errorf("the store moved from revision %d to %d", before, after)
			}
		})
	}
	// "0" is no revision: kube-apiserver accepts it
	zero := testPod("zero")
	zero.ResourceVersion = "0"
	if _, err := admin.Create(ctx(t), zero); err != nil {
		t.Errorf("create with resourceVersion 0 = %v, want it accepted", err)
	}
}

// The QoS class is set once: a status write may leave it out (it is kept)
// but not change it.
func TestUpdateStatus_QOSClassIsImmutable(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, testPod("web"))
	p := mustGetPod(t, admin, "web")
	p.Status.QOSClass = ""
	p.Status.Phase = corev1.PodRunning
	out, err := admin.UpdateStatus(ctx(t), p)
	if err != nil {
		t.Fatalf("UpdateStatus without qosClass: %v", err)
	}
	if q := out.(*corev1.Pod).Status.QOSClass; q != corev1.PodQOSBestEffort {
		t.Errorf("qosClass = %q after a status write that left it out, want BestEffort kept", q)
	}
	p = out.(*corev1.Pod)
	p.Status.QOSClass = corev1.PodQOSGuaranteed
	before := revision(t, s)
	_, err = admin.UpdateStatus(ctx(t), p)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.qosClass: Invalid value: "Guaranteed": field is immutable`) {
		t.Errorf("UpdateStatus changing qosClass = %v, want 422 status.qosClass immutable", err)
	}
	if after := revision(t, s); after != before {
		t.Errorf("the store moved from revision %d to %d", before, after)
	}
}
