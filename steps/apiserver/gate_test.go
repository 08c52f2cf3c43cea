package apiserver

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCreatePodThroughTheGate(t *testing.T) {
	s, _ := testServer(t)
	var phases []Phase
	c := as(t, s, "admin", WithPhases(func(p Phase) { phases = append(phases, p) }))
	before := revision(t, s)
	obj, err := c.Create(ctx(t), testPod("web"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	pod := obj.(*corev1.Pod)
	if pod.UID == "" || pod.CreationTimestamp.IsZero() || pod.Generation != 1 {
		t.Errorf("server-set metadata missing: uid %q, creationTimestamp %v, generation %d", pod.UID, pod.CreationTimestamp, pod.Generation)
	}
	if want := before + 1; pod.ResourceVersion != itoa(want) {
		t.Errorf("resourceVersion = %s, want %d (the store's next revision)", pod.ResourceVersion, want)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.SchedulerName != "default-scheduler" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("defaults not applied: restartPolicy %q, schedulerName %q, phase %q", pod.Spec.RestartPolicy, pod.Spec.SchedulerName, pod.Status.Phase)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("a new pod has node %q; only the scheduler binds", pod.Spec.NodeName)
	}
	var order []string
	for _, p := range phases {
		if len(order) == 0 || order[len(order)-1] != p.Name {
			order = append(order, p.Name)
		}
	}
	want := []string{PhaseAuthentication, PhaseAuthorization, PhaseDefaulting, PhaseMutatingAdmission, PhaseStrategy, PhaseValidation, PhaseValidatingAdmission, PhaseStorage}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("phases ran in the order\n %v\nwant\n %v", order, want)
	}
	// Defaulting is not admission (kube-apiserver defaults what it
	// decodes); the plugins after it are.
	phaseOf := map[string]string{}
	for _, p := range phases {
		if p.Plugin != "" {
			phaseOf[p.Plugin] = p.Name
		}
	}
	for plugin, name := range map[string]string{
		"defaults":                 PhaseDefaulting,
		"NamespaceLifecycle":       PhaseMutatingAdmission,
		"ServiceAccount":           PhaseMutatingAdmission,
		"Priority":                 PhaseMutatingAdmission,
		"PrepareForCreate":         PhaseStrategy,
		"DefaultTolerationSeconds": PhaseMutatingAdmission,
		"LimitRanger":              PhaseValidatingAdmission, // its validating half runs last
		"RuntimeClass":             PhaseValidatingAdmission,
		"PodSecurity":              PhaseValidatingAdmission,
	} {
		if phaseOf[plugin] != name {
			t.Errorf("%s reported as %q, want %q", plugin, phaseOf[plugin], name)
		}
	}
	got, err := c.Get(ctx(t), "pods", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResourceVersion() != pod.ResourceVersion || got.GetUID() != pod.UID {
		t.Errorf("read back rv %s uid %s, created rv %s uid %s", got.GetResourceVersion(), got.GetUID(), pod.ResourceVersion, pod.UID)
	}
}

// TestRejectedRequestsStoreNothing: every way the gate can refuse a create,
// and for each the status error and an unchanged store.
func TestRejectedRequestsStoreNothing(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	// developer is admin of namespace team: may create roles and bindings
	// there, but only with permissions developer holds
	mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	mustCreate(t, admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "developer-admin", Namespace: "team"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "developer"}}})
	mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locked", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})
	mustCreate(t, admin, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}})
	big := testPod("big")
	big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	inLocked := testPod("plain")
	inLocked.Namespace = "locked"
	inMissing := testPod("lost")
	inMissing.Namespace = "nowhere"
	badName := testPod("Web_1")
	noImage := testPod("noimage")
	noImage.Spec.Containers[0].Image = ""
	privileged := testPod("priv")
	privileged.Namespace = "locked"
	yes := true
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}

	tests := []struct {
		name   string
		client *Client
		obj    Object
		is     func(error) bool
		says   string
	}{
		{"unknown token is 401", s.Client("not-a-token"), testPod("a"), apierrors.IsUnauthorized, "Unauthorized"},
		{"viewer may not create pods", as(t, s, "viewer"), testPod("b"), apierrors.IsForbidden, `User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`},
		{"developer may not create in kube-system", as(t, s, "developer"), func() Object { p := testPod("c"); p.Namespace = "kube-system"; return p }(), apierrors.IsForbidden, `in the namespace "kube-system"`},
		{"scheduler may not create pods", as(t, s, "system:kube-scheduler"), testPod("d"), apierrors.IsForbidden, `User "system:kube-scheduler" cannot create resource "pods"`},
		{"namespace must exist", admin, inMissing, apierrors.IsNotFound, `namespaces "nowhere" not found`},
		{"LimitRange max", admin, big, apierrors.IsForbidden, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
		{"PodSecurity restricted", admin, inLocked, apierrors.IsForbidden, `violates PodSecurity "restricted:latest"`},
		{"PodSecurity restricted, privileged", admin, privileged, apierrors.IsForbidden, "privileged"},
		{"invalid name", admin, badName, apierrors.IsInvalid, "metadata.name"},
		{"missing image", admin, noImage, apierrors.IsInvalid, "spec.containers[0].image"},
		{"developer may not grant node deletion", as(t, s, "developer"), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}}}}, apierrors.IsForbidden, "not currently held"},
		{"developer may not create roles in default (edit grants none)", as(t, s, "developer"), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"}},
			apierrors.IsForbidden, `cannot create resource "roles"`},
		{"developer may not bind cluster-admin", as(t, s, "developer"), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "team"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "developer"}}}, apierrors.IsForbidden, "not currently held"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := revision(t, s)
			_, err := tt.client.Create(ctx(t), tt.obj)
			if err == nil || !tt.is(err) {
				t.Fatalf("Create = %v, want a %s error", err, tt.name)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			if after := revision(t, s); after != before {
				t.Errorf("the store moved from revision %d to %d after a rejected request", before, after)
			}
		})
	}
}

func TestDeveloperMayGrantWhatTheyHold(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	mustCreate(t, admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "developer-admin", Namespace: "team"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "developer"}}})
	dev := as(t, s, "developer")
	mustCreate(t, dev, testPod("web"))
	mustCreate(t, dev, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "team"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}})
	mustCreate(t, dev, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer-reads", Namespace: "team"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "viewer"}}})
}

func TestQuotaNeverOvershootsUnderParallelCreates(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}}})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = admin.Create(ctx(t), testPod("p"+itoa(int64(i))))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: pods"):
			t.Errorf("unexpected error: %v", err)
		}
	}
	list, err := admin.List(ctx(t), "pods", "default", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok != 5 || len(list.Items) != 5 {
		t.Errorf("%d creates succeeded and %d pods are stored, want 5 and 5 (the quota)", ok, len(list.Items))
	}
	q, err := admin.Get(ctx(t), "resourcequotas", "default", "pods")
	if err != nil {
		t.Fatal(err)
	}
	used := q.(*corev1.ResourceQuota).Status.Used[corev1.ResourcePods]
	if used.Value() != 5 {
		t.Errorf("quota status.used.pods = %s, want 5", used.String())
	}
}

func TestUpdateConflictsAndSubresources(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	obj := mustCreate(t, admin, testPod("web")).(*corev1.Pod)

	// status update: only the status changes
	st := obj.DeepCopy()
	st.Status.Phase = corev1.PodRunning
	st.Labels["sneaky"] = "yes"
	updated, err := admin.UpdateStatus(ctx(t), st)
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	up := updated.(*corev1.Pod)
	if up.Status.Phase != corev1.PodRunning || up.Labels["sneaky"] != "" {
		t.Errorf("UpdateStatus stored phase %q and label sneaky=%q; want Running and no label", up.Status.Phase, up.Labels["sneaky"])
	}
	// the old resourceVersion is now stale
	stale := obj.DeepCopy()
	stale.Spec.Containers[0].Image = "nginx:1.27"
	if _, err := admin.Update(ctx(t), stale); !apierrors.IsConflict(err) {
		t.Fatalf("Update with a stale resourceVersion = %v, want a conflict", err)
	}
	// a spec update keeps the status and counts a generation
	fresh := up.DeepCopy()
	fresh.Spec.Containers[0].Image = "nginx:1.27"
	fresh.Status.Phase = corev1.PodFailed
	updated, err = admin.Update(ctx(t), fresh)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	up = updated.(*corev1.Pod)
	if up.Spec.Containers[0].Image != "nginx:1.27" || up.Status.Phase != corev1.PodRunning || up.Generation != 2 {
		t.Errorf("after Update: image %q, phase %q, generation %d; want nginx:1.27, Running, 2", up.Spec.Containers[0].Image, up.Status.Phase, up.Generation)
	}
	// no resourceVersion at all
	none := up.DeepCopy()
	none.ResourceVersion = ""
	if _, err := admin.Update(ctx(t), none); !apierrors.IsInvalid(err) {
		t.Errorf("Update without resourceVersion = %v, want invalid", err)
	}
	// pod spec fields other than the image are immutable
	imm := up.DeepCopy()
	imm.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := admin.Update(ctx(t), imm); !apierrors.IsInvalid(err) {
		t.Errorf("changing restartPolicy = %v, want invalid", err)
	}
}

func TestBind(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	sched := as(t, s, "system:kube-scheduler")
	mustCreate(t, admin, testPod("web"))
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := sched.Bind(ctx(t), b); err != nil {
		t.Fatalf("the scheduler's Bind: %v", err)
	}
	obj, err := admin.Get(ctx(t), "pods", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("nodeName = %q after Bind", pod.Spec.NodeName)
	}
	scheduled := false
	for _, c := range pod.Status.Conditions {
		scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
	}
	if !scheduled {
		t.Errorf("no PodScheduled=True condition: %v", pod.Status.Conditions)
	}
	if err := sched.Bind(ctx(t), b); !apierrors.IsConflict(err) {
		t.Errorf("second Bind = %v, want a conflict", err)
	}
	if err := as(t, s, "developer").Bind(ctx(t), b); !apierrors.IsForbidden(err) {
		t.Errorf("developer's Bind = %v, want forbidden", err)
	}
	// the node's kubelet reports status
	pod.Status.Phase = corev1.PodRunning
	if _, err := as(t, s, "system:node:node-1").UpdateStatus(ctx(t), pod); err != nil {
		t.Errorf("the kubelet's UpdateStatus: %v", err)
	}
}

func TestGracefulDeletion(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	sched := as(t, s, "system:kube-scheduler")
	for _, n := range []string{"bound", "forced", "unbound"} {
		mustCreate(t, admin, testPod(n))
	}
	for _, n := range []string{"bound", "forced"} {
		if err := sched.Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	marked, err := admin.Delete(ctx(t), "pods", "default", "bound", DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if marked == nil || marked.GetDeletionTimestamp() == nil || *marked.GetDeletionGracePeriodSeconds() != 30 {
		t.Fatalf("deleting a bound pod should mark it with a 30s grace period, got %v", marked)
	}
	if _, err := admin.Get(ctx(t), "pods", "default", "bound"); err != nil {
		t.Errorf("the marked pod is gone before its kubelet removed it: %v", err)
	}
	// the kubelet finishes the deletion with grace period 0
	zero := int64(0)
	if _, err := as(t, s, "system:node:node-1").Delete(ctx(t), "pods", "default", "bound", DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("the kubelet's final delete: %v", err)
	}
	for _, tt := range []struct {
		name string
		opts DeleteOptions
	}{{"forced", DeleteOptions{Force: true}}, {"unbound", DeleteOptions{}}} {
		if obj, err := admin.Delete(ctx(t), "pods", "default", tt.name, tt.opts); err != nil || obj != nil {
			t.Errorf("delete %s = %v, %v; want it gone at once", tt.name, obj, err)
		}
	}
	for _, n := range []string{"bound", "forced", "unbound"} {
		if _, err := admin.Get(ctx(t), "pods", "default", n); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s: %v, want not found", n, err)
		}
	}
}

func TestNamespaceDeletion(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	if _, err := admin.Delete(ctx(t), "namespaces", "", "default", DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting default = %v, want forbidden", err)
	}
	mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	p := testPod("web")
	p.Namespace = "team"
	mustCreate(t, admin, p)
	if err := as(t, s, "system:kube-scheduler").Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx(t), "namespaces", "", "team", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := admin.Get(ctx(t), "namespaces", "", "team")
	if err != nil || ns.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace team: %v %v, want Terminating while its pod stops", ns, err)
	}
	p2 := testPod("late")
	p2.Namespace = "team"
	if _, err := admin.Create(ctx(t), p2); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "being terminated") {
		t.Errorf("creating in a terminating namespace = %v", err)
	}
	if _, err := admin.Delete(ctx(t), "pods", "team", "web", DeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Get(ctx(t), "namespaces", "", "team"); !apierrors.IsNotFound(err) {
		t.Errorf("namespace team after its last pod went: %v, want not found", err)
	}
}

func TestListSelectorsAndWatch(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	list, err := admin.List(ctx(t), "pods", "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := admin.Watch(ctx(t), "pods", "default", ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, admin, testPod("a")).(*corev1.Pod)
	mustCreate(t, admin, testPod("b"))
	a.Labels["tier"] = "front"
	if _, err := admin.Update(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx(t), "pods", "default", "b", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED a", "ADDED b", "MODIFIED a", "DELETED b"}
	var got []string
	for ev := range w.Events() {
		got = append(got, string(ev.Type)+" "+ev.Object.GetName())
		if len(got) == len(want) {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("watch saw %v, want %v", got, want)
	}

	tests := []struct {
		name string
		opts ListOptions
		want int
	}{
		{"all", ListOptions{}, 1},
		{"label match", ListOptions{LabelSelector: "tier=front"}, 1},
		{"label miss", ListOptions{LabelSelector: "tier=back"}, 0},
		{"field", ListOptions{FieldSelector: "metadata.name=a"}, 1},
		{"node", ListOptions{FieldSelector: "spec.nodeName=node-1"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := admin.List(ctx(t), "pods", "default", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != tt.want {
				t.Errorf("%d items, want %d", len(l.Items), tt.want)
			}
		})
	}
}

// TestList_EventsByInvolvedObject: `kubectl describe pod` lists the pod's
// Events with a field selector on involvedObject.name, .namespace and .uid;
// kube-apiserver's event strategy selects on those fields, and so must
// podlab, or describe prints "Events: <none>" (it ignores the 400).
func TestList_EventsByInvolvedObject(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	a, err := admin.Create(ctx(t), testPod("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := admin.Create(ctx(t), testPod("b"))
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(admin, "default-scheduler", "")
	if err := rec.Event(ctx(t), a, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/a to node-1"); err != nil {
		t.Fatal(err)
	}
	if err := rec.Event(ctx(t), b, corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		selector string
		want     string // the reasons of the events listed
	}{
		{"kubectl describe's selector", "involvedObject.name=a,involvedObject.namespace=default,involvedObject.uid=" + string(a.GetUID()), "Scheduled"},
		{"by kind", "involvedObject.kind=Pod", "Scheduled FailedScheduling"},
		{"by uid of the other pod", "involvedObject.uid=" + string(b.GetUID()), "FailedScheduling"},
		{"by type", "type=Warning", "FailedScheduling"},
		{"by reason", "reason=Scheduled", "Scheduled"},
		{"no match", "involvedObject.uid=nope", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := admin.List(ctx(t), "events", "default", ListOptions{FieldSelector: tt.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range l.Items {
				got = append(got, o.(*corev1.Event).Reason)
			}
			slices.Sort(got)
			want := strings.Fields(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
		})
	}
	// a pod's fields are not an event's, nor an event's a pod's
	for _, c := range []struct{ resource, selector string }{{"events", "spec.nodeName=node-1"}, {"pods", "involvedObject.uid=x"}} {
		if _, err := admin.List(ctx(t), c.resource, "default", ListOptions{FieldSelector: c.selector}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported") {
			t.Errorf("%s with %s: %v, want 400 field label not supported", c.resource, c.selector, err)
		}
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	tests := []struct {
		name string
		do   func() error
		says string
	}{
		{"unknown resource", func() error { _, err := admin.List(ctx(t), "widgets", "", ListOptions{}); return err }, `doesn't have a resource type "widgets"`},
		{"bad label selector", func() error {
			_, err := admin.List(ctx(t), "pods", "", ListOptions{LabelSelector: "a in"})
			return err
		}, "label selector"},
		{"unsupported field", func() error {
			_, err := admin.List(ctx(t), "pods", "", ListOptions{FieldSelector: "spec.image=x"})
			return err
		}, "field label not supported"},
		{"bad resourceVersion", func() error {
			_, err := admin.Watch(ctx(t), "pods", "", ListOptions{ResourceVersion: "abc"})
			return err
		}, "not a revision"},
		{"get missing", func() error { _, err := admin.Get(ctx(t), "pods", "default", "nope"); return err }, `pods "nope" not found`},
		{"delete missing", func() error {
			_, err := admin.Delete(ctx(t), "deployments", "default", "nope", DeleteOptions{})
			return err
		}, `deployments.apps "nope" not found`},
		{"create twice", func() error {
			if _, err := admin.Create(ctx(t), testPod("twice")); err != nil {
				return err
			}
			_, err := admin.Create(ctx(t), testPod("twice"))
			return err
		}, `pods "twice" already exists`},
		{"bind without node", func() error { return admin.Bind(ctx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "x"}}) }, "target.name"},
		{"deployment selector mismatch", func() error {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "y"}}, Spec: testPod("t").Spec}}}
			_, err := admin.Create(ctx(t), d)
			return err
		}, "selector"},
		{"unknown user for --as", func() error { _, err := s.ClientAs("mallory"); return err }, "no such user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

func TestWatchTooOld(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, testPod("a"))
	rev := revision(t, s)
	if err := s.store.Compact(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	_, err := admin.Watch(ctx(t), "pods", "", ListOptions{ResourceVersion: "1"})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from before the compaction = %v, want a too-old (410) error", err)
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Errorf("%v is not a status error", err)
	}
}

func mustCreate(t testing.TB, c *Client, obj Object) Object {
	t.Helper()
	out, err := c.Create(ctx(t), obj)
	if err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	return out
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

// The RBAC policy is cached, and the cache is skipped only while the store
// is at a revision this server knows: a grant or a revocation written by
// another process (here another Server on the same state directory) or by
// this one takes effect on the next request.
func TestPolicyCacheSeesEveryRBACWrite(t *testing.T) {
	s, dir := testServer(t)
	other, err := reopen(t, s, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	admin, viewer := as(t, s, "admin"), as(t, s, "viewer")
	otherAdmin := as(t, other, "admin")
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer-edits", Namespace: "default"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "viewer"}}}
	// On etcd another process's RBAC write reaches this server's cache
	// through a watch, as kube-apiserver's informer: a moment later, not
	// at the next request (policywatch.go). Its own writes count at once.
	lag := time.Duration(0)
	if s.pw != nil {
		lag = 3 * time.Second
	}
	try := func(name string, ok func(error) bool, want string) {
		t.Helper()
		deadline := time.Now().Add(lag)
		for {
			_, err := viewer.Create(ctx(t), testPod(name))
			if ok(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("viewer creating %s: %v, want %s", name, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	denied := func(name string) {
		t.Helper()
		try(name, apierrors.IsForbidden, "403")
	}
	allowed := func(name string) {
		t.Helper()
		try(name, func(err error) bool { return err == nil }, "it allowed")
	}

	denied("a")
	mustCreate(t, admin, testPod("b")) // this server's own write, not RBAC: the cache stays
	denied("c")
	mustCreate(t, otherAdmin, binding) // another process grants
	allowed("d")
	mustCreate(t, admin, testPod("e"))
	allowed("f")
	if _, err := otherAdmin.Delete(ctx(t), "rolebindings", "default", "viewer-edits", DeleteOptions{}); err != nil {
		t.Fatal(err) // another process revokes
	}
	denied("g")
	mustCreate(t, admin, binding.DeepCopy()) // this server grants
	allowed("h")
	if _, err := admin.Delete(ctx(t), "rolebindings", "default", "viewer-edits", DeleteOptions{}); err != nil {
		t.Fatal(err) // and revokes
	}
	denied("i")
}
