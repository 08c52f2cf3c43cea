package apiserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// TestRecorder_Event_RepeatedIsPatched: the same event again is one Event,
// count+1 and a later lastTimestamp, written with a PATCH as client-go's
// event sink does: the recorder's user may create and patch events, not
// update them. Another message, type or object is an Event of its own.
func TestRecorder_Event_RepeatedIsPatched(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "event-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create", "patch"}, APIGroups: []string{""}, Resources: []string{"events"}}}})
	mustCreate(t, admin, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "event-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "event-writer"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "recorder"}}})
	pod, err := admin.Create(ctx(t), testPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.Create(ctx(t), testPod("db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(s.ClientFor(authn.User{Name: "recorder"}, "test"), "default-scheduler", "")
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	rec.now = func() time.Time { return clock }
	const msg = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	for i := range 3 {
		clock = clock.Add(time.Duration(i) * time.Minute)
		if err := rec.Event(ctx(t), pod, corev1.EventTypeWarning, "FailedScheduling", msg); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	// not the same event: another message, another type, another object
	for _, e := range []struct {
		obj            Object
		typ, reason, m string
	}{
		{pod, corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available: 1 Too many pods."},
		{pod, corev1.EventTypeNormal, "FailedScheduling", msg},
		{other, corev1.EventTypeWarning, "FailedScheduling", msg},
	} {
		clock = clock.Add(time.Second) // Event names are the object's and the time's
		if err := rec.Event(ctx(t), e.obj, e.typ, e.reason, e.m); err != nil {
			t.Fatal(err)
		}
	}
	l, err := admin.List(ctx(t), "events", "default", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 4 {
		t.Fatalf("%d Events, want 4 (three of the same merged into one)", len(l.Items))
	}
	var merged *corev1.Event
	for _, o := range l.Items {
		ev := o.(*corev1.Event)
		if ev.InvolvedObject.Name == "web" && ev.Message == msg && ev.Type == corev1.EventTypeWarning {
			merged = ev
		} else if ev.Count != 1 {
			t.Errorf("event %s %q about %s: count %d, want 1", ev.Type, ev.Message, ev.InvolvedObject.Name, ev.Count)
		}
	}
	if merged == nil {
		t.Fatal("no FailedScheduling Event about web")
	}
	if merged.Count != 3 || !merged.FirstTimestamp.Time.Equal(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)) ||
		!merged.LastTimestamp.Time.Equal(time.Date(2026, 12, 3, 10, 3, 0, 0, time.UTC)) {
		t.Errorf("merged event: count %d, first %s, last %s; want 3, 10:00, 10:03", merged.Count, merged.FirstTimestamp, merged.LastTimestamp)
	}

	// deleted meanwhile: recorded anew
	if _, err := admin.Delete(ctx(t), "events", "default", merged.Name, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Second)
	if err := rec.Event(ctx(t), pod, corev1.EventTypeWarning, "FailedScheduling", msg); err != nil {
		t.Fatalf("after the Event was deleted: %v", err)
	}
}
