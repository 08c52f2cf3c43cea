package rest

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func testDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
			},
		},
	}
}

// client-go's typed clientset creates, reads, lists, updates and deletes
// pods as against a cluster.
func TestClientGo_Pods(t *testing.T) {
	l := newLab(t, nil)
	pods := l.clientset("admin").CoreV1().Pods("default")
	created, err := pods.Create(ctx(t), testPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Status.Phase != corev1.PodPending {
		t.Errorf("created pod uid %q rv %q phase %q: want them set, Pending", created.UID, created.ResourceVersion, created.Status.Phase)
	}
	got, err := pods.Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil || got.UID != created.UID {
		t.Fatalf("Get: %v, uid %v want %v", err, got.UID, created.UID)
	}
	for i, name := range []string{"a", "b", "c"} {
		p := testPod(name)
		p.Labels["tier"] = []string{"db", "web", "web"}[i]
		if _, err := pods.Create(ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := pods.List(ctx(t), metav1.ListOptions{LabelSelector: "tier=web"})
	if err != nil || len(list.Items) != 2 || list.ResourceVersion == "" {
		t.Fatalf("List tier=web: %v, %d items rv %q; want b and c", err, len(list.Items), list.ResourceVersion)
	}
	list, err = pods.List(ctx(t), metav1.ListOptions{FieldSelector: "metadata.name=web"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("List metadata.name=web: %v, %d items", err, len(list.Items))
	}
	// pages of two: a, b | c, web
	page, err := pods.List(ctx(t), metav1.ListOptions{Limit: 2})
	if err != nil || len(page.Items) != 2 || page.Continue == "" {
		t.Fatalf("List limit 2: %v, %d items continue %q", err, len(page.Items), page.Continue)
	}
	rest, err := pods.List(ctx(t), metav1.ListOptions{Limit: 2, Continue: page.Continue})
	if err != nil || len(rest.Items) != 2 || rest.Continue != "" || rest.Items[0].Name != "c" || rest.ResourceVersion != page.ResourceVersion {
		t.Fatalf("second page: %v, %d items continue %q, rv %s want %s", err, len(rest.Items), rest.Continue, rest.ResourceVersion, page.ResourceVersion)
	}
	got.Labels["version"] = "2"
	updated, err := pods.Update(ctx(t), got, metav1.UpdateOptions{})
	if err != nil || updated.Labels["version"] != "2" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("Update: %v, labels %v", err, updated.Labels)
	}
	if _, err := pods.Update(ctx(t), got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update from a stale resourceVersion: %v, want a conflict", err)
	}
	if err := pods.Delete(ctx(t), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := pods.Get(ctx(t), "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
}

func TestClientGo_Deployments(t *testing.T) {
	l := newLab(t, nil)
	deps := l.clientset("admin").AppsV1().Deployments("default")
	d, err := deps.Create(ctx(t), testDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if d.Generation != 1 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("generation %d strategy %q: want 1 and the default RollingUpdate", d.Generation, d.Spec.Strategy.Type)
	}
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27"
	d, err = deps.Update(ctx(t), d, metav1.UpdateOptions{})
	if err != nil || d.Generation != 2 {
		t.Fatalf("Update: %v, generation %d want 2", err, d.Generation)
	}
	list, err := l.clientset("admin").AppsV1().Deployments("").List(ctx(t), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("List in every namespace: %v, %d items", err, len(list.Items))
	}
	if err := deps.Delete(ctx(t), "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// The subresources: binding, status, scale.
func TestClientGo_Subresources(t *testing.T) {
	l := newLab(t, nil)
	cs := l.clientset("admin")
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Create(ctx(t), testPod("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the scheduler's write: POST pods/web/binding
	err := l.clientset("system:kube-scheduler").CoreV1().Pods("default").Bind(ctx(t), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	p, err := pods.Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "node-1" {
		t.Fatalf("after Bind: %v, nodeName %q", err, p.Spec.NodeName)
	}
	// the kubelet's write: PUT pods/web/status
	p.Status.Phase = corev1.PodRunning
	p.Labels["ignored"] = "yes"
	p, err = l.clientset("system:node:node-1").CoreV1().Pods("default").UpdateStatus(ctx(t), p, metav1.UpdateOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning || p.Labels["ignored"] != "" {
		t.Fatalf("UpdateStatus: %v, phase %q labels %v: want Running, labels untouched", err, p.Status.Phase, p.Labels)
	}
	deps := cs.AppsV1().Deployments("default")
	if _, err := deps.Create(ctx(t), testDeployment("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, err := deps.GetScale(ctx(t), "web", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 2 || sc.Status.Selector != "app=web" {
		t.Fatalf("GetScale: %v, %+v", err, sc)
	}
	sc.Spec.Replicas = 5
	stale := sc.DeepCopy()
	if sc, err = deps.UpdateScale(ctx(t), "web", sc, metav1.UpdateOptions{}); err != nil || sc.Spec.Replicas != 5 {
		t.Fatalf("UpdateScale: %v, %+v", err, sc)
	}
	if _, err := deps.UpdateScale(ctx(t), "web", stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("UpdateScale from a stale resourceVersion: %v, want a conflict", err)
	}
	_, err = deps.Patch(ctx(t), "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}, "scale")
	if err != nil {
		t.Fatalf("Patch scale: %v", err)
	}
	d, err := deps.Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("replicas after patching scale: %v, %d", err, *d.Spec.Replicas)
	}
}

// The three patch types kubectl sends.
func TestClientGo_Patch(t *testing.T) {
	tests := []struct {
		name  string
		pt    types.PatchType
		patch string
		check func(*appsv1.Deployment) bool
	}{
		{"strategic merge patch merges containers by name", types.StrategicMergePatchType,
			`{"spec":{"template":{"spec":{"containers":[{"name":"log","image":"busybox"}]}}}}`,
			func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.Containers) == 2 }},
		{"merge patch replaces the list", types.MergePatchType,
			`{"spec":{"template":{"spec":{"containers":[{"name":"log","image":"busybox"}]}}}}`,
			func(d *appsv1.Deployment) bool {
				return len(d.Spec.Template.Spec.Containers) == 1 && d.Spec.Template.Spec.Containers[0].Name == "log"
			}},
		{"JSON patch by path", types.JSONPatchType,
			`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]`,
			func(d *appsv1.Deployment) bool { return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, nil)
			deps := l.clientset("admin").AppsV1().Deployments("default")
			if _, err := deps.Create(ctx(t), testDeployment("web"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			d, err := deps.Patch(ctx(t), "web", tt.pt, []byte(tt.patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			if !tt.check(d) || d.Generation != 2 {
				t.Errorf("patched: generation %d, containers %+v", d.Generation, d.Spec.Template.Spec.Containers)
			}
		})
	}
}

// DELETE answers the pod as marked while its kubelet stops it, and a
// Success Status once an object is gone.
func TestDelete_Responses(t *testing.T) {
	l := newLab(t, nil)
	cs := l.clientset("admin")
	for _, name := range []string{"unbound", "bound"} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, body, _ := l.do("admin", "DELETE", "/api/v1/namespaces/default/pods/unbound", "", nil)
	if st := status(t, body); code != 200 || st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "unbound" || st.Details.Kind != "pods" {
		t.Errorf("deleting an unbound pod: %d %s, want 200 and a Success Status naming it", code, body)
	}
	code, body, _ = l.do("admin", "DELETE", "/api/v1/namespaces/default/pods/bound", "application/json", []byte(`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5}`))
	var p corev1.Pod
	if err := json.Unmarshal(body, &p); code != 200 || err != nil || p.DeletionTimestamp == nil || *p.DeletionGracePeriodSeconds != 5 {
		t.Errorf("deleting a bound pod: %d %s, want 200 and the pod marked with a grace period of 5s", code, body)
	}
	code, body, _ = l.do("admin", "DELETE", "/api/v1/namespaces/default/pods/bound?gracePeriodSeconds=0", "", nil)
	if st := status(t, body); code != 200 || st.Status != metav1.StatusSuccess {
		t.Errorf("deleting it with gracePeriodSeconds=0: %d %s, want it gone", code, body)
	}
	code, body, _ = l.do("admin", "DELETE", "/api/v1/namespaces/default/pods/bound?propagationPolicy=Sideways", "", nil)
	if st := status(t, body); code != 422 || !strings.Contains(st.Message, `propagationPolicy: Unsupported value: "Sideways"`) {
		t.Errorf("a bad propagationPolicy: %d %+v, want 422", code, st)
	}
}
