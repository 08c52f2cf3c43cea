package controllers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// A new Deployment: one ReplicaSet named by kube's hash, owned by the
// Deployment, with the hash label, the annotations and the pods; then the
// pods turn Ready and the status follows.
func TestOnce_NewDeployment(t *testing.T) {
	l := newLab(t)
	d := l.create(deployment("web", 3, nil, nil)).(*appsv1.Deployment)
	rep := l.once()

	rss := l.replicaSets()
	if len(rss) != 1 {
		t.Fatalf("%d ReplicaSets, want 1", len(rss))
	}
	rs := rss[0]
	if want := "web-549cbb9bcd"; rs.Name != want { // kube-controller-manager v1.37's name, see hash_test.go
		t.Errorf("ReplicaSet %q, want %q", rs.Name, want)
	}
	hash := hashOf(rs)
	if rs.Name != "web-"+ComputeHash(&d.Spec.Template, nil) {
		t.Errorf("ReplicaSet %q is not web-<ComputeHash of the stored template>", rs.Name)
	}
	if rs.Spec.Selector.MatchLabels[PodTemplateHashLabel] != hash || rs.Spec.Template.Labels[PodTemplateHashLabel] != hash || rs.Spec.Template.Labels["app"] != "web" {
		t.Errorf("pod-template-hash missing: selector %v, template labels %v", rs.Spec.Selector.MatchLabels, rs.Spec.Template.Labels)
	}
	wantAnn := map[string]string{RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4"}
	for k, v := range wantAnn {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s=%q, want %q", k, rs.Annotations[k], v)
		}
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("owner reference %+v, want the Deployment as controller, blocking its deletion", ref)
	}
	pods := l.pods(hash)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		pref := metav1.GetControllerOf(p)
		if pref == nil || pref.UID != rs.UID || !regexp.MustCompile(`^web-549cbb9bcd-[bcdfghjklmnpqrstvwxz2456789]{5}$`).MatchString(p.Name) {
			t.Errorf("pod %s: owner %+v, want name %s-xxxxx owned by it", p.Name, pref, rs.Name)
		}
	}
	if len(rep.PodsCreated) != 3 || len(rep.ReplicaSetsCreated) != 1 || rep.ScalingEvents[0] != "Scaled up replica set web-549cbb9bcd from 0 to 3" {
		t.Errorf("report %+v", rep)
	}

	got := l.getDeployment("web")
	if got.Annotations[RevisionAnnotation] != "1" {
		t.Errorf("deployment revision %q, want 1", got.Annotations[RevisionAnnotation])
	}
	if got.Generation != 1 {
		t.Errorf("writing the revision changed the generation to %d", got.Generation)
	}
	checkStatus(t, got, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, UnavailableReplicas: 3})
	checkCondition(t, got, appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable)
	checkCondition(t, got, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonReplicaSetUpdated)

	events := l.events()
	for _, want := range []string{
		"Deployment/web ScalingReplicaSet Scaled up replica set web-549cbb9bcd from 0 to 3",
		"ReplicaSet/web-549cbb9bcd SuccessfulCreate Created pod: " + pods[0].Name,
	} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in\n%s", want, events)
		}
	}
	log := l.log.String()
	for _, want := range []string{
		`deployment_controller.go:203] "Adding deployment" logger="deployment-controller" deployment="default/web"`,
		`deployment_controller.go:583] "Started syncing deployment" logger="deployment-controller" deployment="default/web" startTime=`,
		`deployment_controller.go:585] "Finished syncing deployment" logger="deployment-controller" deployment="default/web" duration=`,
		`deployment_util.go:262] "Updating replica set revision" logger="deployment-controller" replicaSet="default/web-549cbb9bcd" newRevision="1"`,
		`replica_set.go:389] "Adding" logger="replicaset-controller" replicaSet="default/web-549cbb9bcd"`,
		`replica_set.go:668] "Too few replicas" logger="replicaset-controller" replicaSet="default/web-549cbb9bcd" need=3 creating=3`,
		`deployment_controller.go:248] "ReplicaSet added" logger="deployment-controller" replicaSet="default/web-549cbb9bcd"`,
		`event.go:395] "Event occurred" logger="deployment-controller" object="default/web" fieldPath="" kind="Deployment" apiVersion="apps/v1" type="Normal" reason="ScalingReplicaSet" message="Scaled up replica set web-549cbb9bcd from 0 to 3"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// The kubelet's part: the pods run and are Ready.
	l.markAllReady()
	l.once()
	got = l.getDeployment("web")
	checkStatus(t, got, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3})
	checkCondition(t, got, appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable)
	checkCondition(t, got, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable)
	rs = l.replicaSets()[0]
	if s := rs.Status; s.Replicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 3 || s.FullyLabeledReplicas != 3 || s.ObservedGeneration != 1 {
		t.Errorf("ReplicaSet status %+v", s)
	}

	// Nothing to do: a further pass writes nothing.
	if rep := l.once(); rep.Writes != 0 || rep.Passes != 1 {
		t.Errorf("a settled cluster took %d passes and %d writes", rep.Passes, rep.Writes)
	}
}

func checkStatus(t *testing.T, d *appsv1.Deployment, want appsv1.DeploymentStatus) {
	t.Helper()
	s := d.Status
	if s.ObservedGeneration != want.ObservedGeneration || s.Replicas != want.Replicas || s.UpdatedReplicas != want.UpdatedReplicas ||
		s.ReadyReplicas != want.ReadyReplicas || s.AvailableReplicas != want.AvailableReplicas || s.UnavailableReplicas != want.UnavailableReplicas {
		t.Errorf("deployment status %+v, want %+v", s, want)
	}
}

func checkCondition(t *testing.T, d *appsv1.Deployment, ct appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason string) {
	t.Helper()
	c := deploymentCondition(d.Status, ct)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %+v, want %s %s", ct, c, status, reason)
	}
}

// events lists the stored Events as "Kind/name Reason Message" lines.
func (l *lab) events() string {
	l.t.Helper()
	list, err := l.admin.List(l.ctx, "events", "default", apiserver.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range list.Items {
		e := o.(*corev1.Event)
		fmt.Fprintf(&b, "%s/%s %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// Scaling: up creates the missing pods; down deletes the surplus, the
// cheapest first: an unscheduled pod, then a pending one, never the one
// running and Ready.
func TestOnce_Scale(t *testing.T) {
	t.Run("up 1 to 3 creates 2", func(t *testing.T) {
		l := newLab(t)
		l.create(deployment("web", 1, nil, nil))
		l.once()
		l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(3)) })
		rep := l.once()
		rs := l.replicaSets()
		if len(rs) != 1 || *rs[0].Spec.Replicas != 3 || len(l.pods("")) != 3 || len(rep.PodsCreated) != 2 {
			t.Fatalf("after scaling up: %d ReplicaSets, %d pods, created %v", len(rs), len(l.pods("")), rep.PodsCreated)
		}
		if rep.ScalingEvents[0] != "Scaled up replica set "+rs[0].Name+" from 1 to 3" {
			t.Errorf("scaling events %v", rep.ScalingEvents)
		}
		if !strings.Contains(l.log.String(), `"Too few replicas" logger="replicaset-controller" replicaSet="default/`+rs[0].Name+`" need=3 creating=2`) {
			t.Errorf("no Too few replicas need=3 creating=2 line")
		}
	})
	t.Run("down 3 to 1 deletes unscheduled and pending first", func(t *testing.T) {
		l := newLab(t)
		l.create(deployment("web", 3, nil, nil))
		l.once()
		pods := l.pods("")
		running, pending, unscheduled := pods[0], pods[1], pods[2]
		l.bind(running)
		l.bind(pending)
		running = mustGetPod(l, running.Name)
		l.markReady(running)
		l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(1)) })
		rep := l.once()

		if _, err := l.admin.Get(l.ctx, "pods", "default", unscheduled.Name); !apierrors.IsNotFound(err) {
			t.Errorf("the unscheduled pod is still there (%v): an unbound pod is deleted at once", err)
		}
		if p := mustGetPod(l, pending.Name); p.DeletionTimestamp == nil {
			t.Errorf("the pending pod on node-1 has no deletionTimestamp")
		}
		if p := mustGetPod(l, running.Name); p.DeletionTimestamp != nil {
			t.Errorf("the running Ready pod was deleted")
		}
		rs := l.replicaSets()[0]
		if *rs.Spec.Replicas != 1 || rs.Status.Replicas != 1 {
			t.Errorf("ReplicaSet spec %d status %d, want 1 and 1 (a terminating pod is not counted)", *rs.Spec.Replicas, rs.Status.Replicas)
		}
		if len(rep.PodsDeleted) != 2 {
			t.Errorf("deleted %v", rep.PodsDeleted)
		}
		if !strings.Contains(l.log.String(), `"Too many replicas" logger="replicaset-controller" replicaSet="default/`+rs.Name+`" need=1 deleting=2`) {
			t.Errorf("no Too many replicas need=1 deleting=2 line")
		}
		if !strings.Contains(l.events(), "ReplicaSet/"+rs.Name+" SuccessfulDelete Deleted pod: "+unscheduled.Name) {
			t.Errorf("no SuccessfulDelete event for %s:\n%s", unscheduled.Name, l.events())
		}
	})
}

func mustGetPod(l *lab, name string) *corev1.Pod {
	l.t.Helper()
	o, err := l.admin.Get(l.ctx, "pods", "default", name)
	if err != nil {
		l.t.Fatal(err)
	}
	return o.(*corev1.Pod)
}

// A template change rolls out a new ReplicaSet one step per readiness:
// after each `--once`, (old, new) spec.replicas is the next pair, never
// more than replicas+maxSurge pods run, never fewer than
// replicas-maxUnavailable are Ready.
func TestOnce_RollingUpdate(t *testing.T) {
	cases := []struct {
		name        string
		replicas    int32
		surge       intstr.IntOrString
		unavailable intstr.IntOrString
		steps       [][2]int32 // (old, new) after the template change, then after each "all Ready"
	}{
		{"surge 1 unavailable 0", 3, intstr.FromInt32(1), intstr.FromInt32(0), [][2]int32{{3, 1}, {2, 2}, {1, 3}, {0, 3}}},
		{"25% of 4: surge 1 unavailable 1", 4, intstr.FromString("25%"), intstr.FromString("25%"), [][2]int32{{3, 2}, {1, 4}, {0, 4}}},
		{"surge 0 unavailable 1", 2, intstr.FromInt32(0), intstr.FromInt32(1), [][2]int32{{1, 1}, {0, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t)
			l.create(deployment("web", c.replicas, &c.surge, &c.unavailable))
			l.once()
			l.markAllReady()
			l.once()
			oldRS := l.replicaSets()[0]
			maxPods := int(c.replicas + maxSurge(l.getDeployment("web")))
			minReady := int(c.replicas - maxUnavailable(l.getDeployment("web")))

			l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
			for i, want := range c.steps {
				if i > 0 {
					l.markAllReady()
				}
				l.once()
				rss := l.replicaSets()
				if len(rss) != 2 {
					t.Fatalf("step %d: %d ReplicaSets, want 2", i, len(rss))
				}
				newRS := rss[1]
				if rss[0].UID != oldRS.UID || newRS.Annotations[RevisionAnnotation] != "2" || oldRS.Annotations[RevisionAnnotation] != "1" {
					t.Fatalf("step %d: the old ReplicaSet changed or revisions are wrong", i)
				}
				got := [2]int32{*rss[0].Spec.Replicas, *newRS.Spec.Replicas}
				if got != want {
					t.Errorf("step %d: (old, new) = %v, want %v", i, got, want)
				}
				active, ready := activePods(l.pods(""))
				if active > maxPods || ready < minReady {
					t.Errorf("step %d: %d pods (max %d), %d Ready (min %d)", i, active, maxPods, ready, minReady)
				}
			}
			l.markAllReady()
			l.once()
			d := l.getDeployment("web")
			checkStatus(t, d, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: c.replicas, UpdatedReplicas: c.replicas, ReadyReplicas: c.replicas, AvailableReplicas: c.replicas})
			checkCondition(t, d, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable)
			if d.Annotations[RevisionAnnotation] != "2" {
				t.Errorf("deployment revision %q, want 2", d.Annotations[RevisionAnnotation])
			}
			newHash := hashOf(l.replicaSets()[1])
			if n := len(l.pods(newHash)); n != int(c.replicas) || len(l.pods("")) != int(c.replicas) {
				t.Errorf("%d pods of the new template, %d in all, want %d", n, len(l.pods("")), c.replicas)
			}
		})
	}
}

// Recreate: the old ReplicaSet goes to 0 first, the new one is created only
// when no old pod is left, not even a terminating one.
func TestOnce_Recreate(t *testing.T) {
	l := newLab(t)
	d := deployment("web", 2, nil, nil)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	l.create(d)
	l.once()
	old := l.replicaSets()[0]
	for _, p := range l.pods("") {
		l.bind(p)
	}
	l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
	l.once()
	rss := l.replicaSets()
	if len(rss) != 1 || *rss[0].Spec.Replicas != 0 {
		t.Fatalf("while old pods terminate: %d ReplicaSets, old at %d; want only the old one, at 0", len(rss), *rss[0].Spec.Replicas)
	}
	terminating := l.pods("")
	if len(terminating) != 2 {
		t.Fatalf("%d old pods, want 2 terminating", len(terminating))
	}
	for _, p := range terminating {
		if p.DeletionTimestamp == nil {
			t.Errorf("old pod %s is not terminating", p.Name)
		}
		l.finish(p) // the kubelet stopped it
	}
	l.once()
	rss = l.replicaSets()
	if len(rss) != 2 || *rss[1].Spec.Replicas != 2 {
		t.Fatalf("after the old pods went: %d ReplicaSets; want the new one at 2", len(rss))
	}
	if n := len(l.pods(hashOf(rss[1]))); n != 2 {
		t.Errorf("%d new pods, want 2", n)
	}
	log := l.log.String()
	down := strings.Index(log, "Scaled down replica set "+old.Name+" from 2 to 0")
	up := strings.Index(log, "Scaled up replica set "+rss[1].Name+" from 0 to 2")
	if down < 0 || up < 0 || up < down {
		t.Errorf("want the old ReplicaSet scaled down (at %d) before the new one up (at %d)", down, up)
	}
}

// Deleting a Deployment: the garbage collector deletes its ReplicaSet
// (owner gone), then the ReplicaSet's pods: the unbound one at once, the
// one on a node gracefully.
func TestOnce_GarbageCollection(t *testing.T) {
	l := newLab(t)
	l.create(deployment("web", 2, nil, nil))
	l.create(deployment("other", 1, nil, nil))
	l.once()
	rs := l.replicaSets()
	var webRS *appsv1.ReplicaSet
	for _, r := range rs {
		if strings.HasPrefix(r.Name, "web-") {
			webRS = r
		}
	}
	pods := l.pods(hashOf(webRS))
	bound, unbound := pods[0], pods[1]
	l.bind(bound)
	if _, err := l.admin.Delete(l.ctx, "deployments", "default", "web", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := l.once()
	if _, err := l.admin.Get(l.ctx, "replicasets", "default", webRS.Name); !apierrors.IsNotFound(err) {
		t.Errorf("ReplicaSet %s survived its Deployment (%v)", webRS.Name, err)
	}
	if _, err := l.admin.Get(l.ctx, "pods", "default", unbound.Name); !apierrors.IsNotFound(err) {
		t.Errorf("unbound pod %s survived (%v)", unbound.Name, err)
	}
	if p := mustGetPod(l, bound.Name); p.DeletionTimestamp == nil {
		t.Errorf("bound pod %s has no deletionTimestamp", bound.Name)
	}
	want := []string{"replicasets/default/" + webRS.Name, "pods/default/" + bound.Name, "pods/default/" + unbound.Name}
	if strings.Join(rep.Collected, " ") != strings.Join(want, " ") && strings.Join(rep.Collected, " ") != strings.Join([]string{want[0], want[2], want[1]}, " ") {
		t.Errorf("collected %v, want %v", rep.Collected, want)
	}
	if n := len(l.pods("")); n != 2 { // other's pod and the terminating one
		t.Errorf("%d pods left, want 2", n)
	}
	if !regexp.MustCompile(`garbagecollector.go:650\] "Deleting item" logger="garbage-collector-controller" item="\[apps/v1/ReplicaSet, namespace: default, name: ` + webRS.Name + `, uid: [0-9a-f-]+\]" propagationPolicy="Background"`).MatchString(l.log.String()) {
		t.Errorf("no Deleting item line for the ReplicaSet in\n%s", l.log.String())
	}
}

// conflicting makes the controller-manager's first write of one kind lose
// a race: just before it, another user changes the same ReplicaSet, so the
// controller's copy is stale and the API server answers 409 Conflict.
type conflicting struct {
	apiserver.Interface
	admin  apiserver.Interface
	status bool
	raced  bool
}

func (c *conflicting) race(ctx context.Context, obj apiserver.Object) {
	if c.raced {
		return
	}
	if _, ok := obj.(*appsv1.ReplicaSet); !ok {
		return
	}
	c.raced = true
	o, err := c.admin.Get(ctx, "replicasets", obj.GetNamespace(), obj.GetName())
	if err != nil {
		return
	}
	ann := o.GetAnnotations()
	ann["example.com/touched"] = "yes"
	o.SetAnnotations(ann)
	_, _ = c.admin.Update(ctx, o)
}

func (c *conflicting) Update(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	if !c.status {
		c.race(ctx, obj)
	}
	return c.Interface.Update(ctx, obj)
}

func (c *conflicting) UpdateStatus(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	if c.status {
		c.race(ctx, obj)
	}
	return c.Interface.UpdateStatus(ctx, obj)
}

// A write that conflicts is retried with the fresh object: the Deployment
// controller requeues the key, the ReplicaSet controller reads the
// ReplicaSet again and writes the status once more.
func TestOnce_ConflictsAreRetried(t *testing.T) {
	cases := []struct {
		name    string
		status  bool
		wantLog string
	}{
		{"scaling a ReplicaSet", false, `"Error syncing deployment" logger="deployment-controller" deployment="default/web" err="Operation cannot be fulfilled on replicasets.apps`},
		{"writing a ReplicaSet's status", true, `"Updating status for ReplicaSet: default/web-`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t)
			l.create(deployment("web", 2, nil, nil))
			l.once()
			l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(4)) })
			racer := &conflicting{Interface: l.cm, admin: l.admin, status: c.status}
			rep, err := l.manager(racer).Once(l.ctx)
			if err != nil || !rep.Settled {
				t.Fatalf("Once: %v %+v", err, rep)
			}
			if !racer.raced {
				t.Fatal("no write to race with")
			}
			rs := l.replicaSets()[0]
			if *rs.Spec.Replicas != 4 || rs.Status.Replicas != 4 || len(l.pods("")) != 4 {
				t.Errorf("ReplicaSet spec %d status %d, %d pods; want 4", *rs.Spec.Replicas, rs.Status.Replicas, len(l.pods("")))
			}
			if rs.Annotations["example.com/touched"] != "yes" {
				t.Error("the other user's change was overwritten")
			}
			if !strings.Contains(l.log.String(), c.wantLog) {
				t.Errorf("log lacks %q", c.wantLog)
			}
		})
	}
}

// The klog lines, byte for byte, with a fixed clock and pid 1.
func TestOnce_KlogLines(t *testing.T) {
	l := newLab(t)
	l.create(deployment("web", 1, nil, nil))
	at := time.Date(2025, 5, 28, 8, 1, 29, 555150000, time.UTC)
	w := klog.New(l.log, klog.WithVerbosity(4), klog.WithPID(1), klog.WithClock(func() time.Time { return at }))
	if _, err := New(l.cm, w, WithClock(func() time.Time { return at })).Once(l.ctx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(l.log.String(), "\n")
	for _, want := range []string{
		`I0528 08:01:29.555150       1 deployment_controller.go:203] "Adding deployment" logger="deployment-controller" deployment="default/web"`,
		`I0528 08:01:29.555150       1 deployment_controller.go:583] "Started syncing deployment" logger="deployment-controller" deployment="default/web" startTime="2025-05-28 08:01:29.55515 +0000 UTC"`,
		`I0528 08:01:29.555150       1 deployment_util.go:262] "Updating replica set revision" logger="deployment-controller" replicaSet="default/web-549cbb9bcd" newRevision="1"`,
		`I0528 08:01:29.555150       1 deployment_controller.go:585] "Finished syncing deployment" logger="deployment-controller" deployment="default/web" duration="0s"`,
		`I0528 08:01:29.555150       1 replica_set.go:668] "Too few replicas" logger="replicaset-controller" replicaSet="default/web-549cbb9bcd" need=1 creating=1`,
		`I0528 08:01:29.555150       1 controllermanager.go:764] "Controller starting..." controller="deployment-controller"`,
		`I0528 08:01:29.555150       1 shared_informer.go:531] "Caches are synced" logger="deployment-controller"`,
	} {
		found := false
		for _, line := range lines {
			found = found || line == want
		}
		if !found {
			t.Errorf("no line\n%s\nin\n%s", want, l.log.String())
		}
	}
}

// Inputs that must fail, each with an error that says why.
func TestOnce_Fails(t *testing.T) {
	cases := []struct {
		name  string
		user  string
		setup func(*lab, context.CancelFunc)
		opts  []Option
		check func(error) bool
		want  string
	}{
		{
			name: "a user RBAC does not let write ReplicaSets", user: "viewer",
			setup: func(l *lab, _ context.CancelFunc) {
				l.letViewerListNodes()
				l.create(deployment("web", 1, nil, nil))
			},
			check: apierrors.IsForbidden, want: `cannot create resource "replicasets"`,
		},
		{
			name: "a user RBAC does not let list nodes (the taint-eviction controller's informer)", user: "viewer",
			setup: func(l *lab, _ context.CancelFunc) { l.create(deployment("web", 1, nil, nil)) },
			check: apierrors.IsForbidden, want: `listing nodes: nodes is forbidden: User "viewer" cannot list resource "nodes"`,
		},
		{
			name: "a cancelled context", user: User,
			setup: func(_ *lab, cancel context.CancelFunc) { cancel() },
			check: func(err error) bool { return errors.Is(err, context.Canceled) }, want: "context canceled",
		},
		{
			name: "too few passes to settle", user: User, opts: []Option{WithMaxPasses(1)},
			setup: func(l *lab, _ context.CancelFunc) { l.create(deployment("web", 1, nil, nil)) },
			check: func(err error) bool { return errors.Is(err, ErrNotSettled) }, want: "still changing objects after the last pass (1 passes)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t)
			ctx, cancel := context.WithCancel(l.ctx)
			defer cancel()
			c.setup(l, cancel)
			srvClient := l.cm
			if c.user != User {
				srvClient = l.as(c.user)
			}
			rep, err := l.manager(srvClient, c.opts...).Once(ctx)
			if err == nil || !c.check(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Once = %v, want an error containing %q", err, c.want)
			}
			if rep == nil || rep.Settled {
				t.Errorf("report %+v for a failed Once", rep)
			}
		})
	}
}

func (l *lab) as(user string) apiserver.Interface {
	l.t.Helper()
	out, err := l.srv.ClientAs(user)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// A ReplicaSet created by hand with a Deployment's labels is adopted; one
// controlled by another owner is left alone.
func TestOnce_AdoptsOrphans(t *testing.T) {
	l := newLab(t)
	d := deployment("web", 1, nil, nil)
	l.create(d)
	l.once()
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "old"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "v": "old"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.0"}}},
			},
		},
	}
	l.create(orphan)
	l.once()
	o, err := l.admin.Get(l.ctx, "replicasets", "default", "by-hand")
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Name != "web" {
		t.Errorf("the orphan's controller is %+v, want Deployment web", ref)
	}
}

// Run is the long-running controller-manager: informers watch, workers
// sync, and the pods appear without anyone calling it again.
func TestRun_WatchesAndStops(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithCancel(l.ctx)
	done := make(chan error, 1)
	go func() { done <- l.manager(l.cm).Run(ctx) }()
	l.create(deployment("web", 2, nil, nil))
	deadline := time.Now().Add(20 * time.Second)
	for len(l.pods("")) < 2 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no pods after 20s; log:\n%s", tail(l.log.String(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(1)) })
	for len(l.pods("")) != 1 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("still %d pods after scaling to 1", len(l.pods("")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if len(l.pods("")) != 1 {
		t.Errorf("%d pods, want 1 (no pod created twice)", len(l.pods("")))
	}
	if !strings.Contains(l.log.String(), `"Shutting down controller" logger="deployment-controller" controller="deployment"`) {
		t.Error("no shutdown line")
	}
}

// Scaling in the middle of a rollout is shared between the ReplicaSets in
// proportion to their size (max-replicas annotation), so it neither hastens
// nor slows the rollout: (2, 2) of 3 with maxSurge 1, scaled to 6 (7 pods
// allowed), becomes (3, 4).
func TestOnce_ProportionalScalingDuringRollout(t *testing.T) {
	l := newLab(t)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	l.create(deployment("web", 3, &surge, &unavailable))
	l.once()
	l.markAllReady()
	l.once()
	l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
	l.once()
	l.markAllReady()
	l.once()
	rss := l.replicaSets()
	if got := [2]int32{*rss[0].Spec.Replicas, *rss[1].Spec.Replicas}; got != [2]int32{2, 2} {
		t.Fatalf("mid-rollout (old, new) = %v, want [2 2]", got)
	}
	l.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(6)) })
	l.once()
	rss = l.replicaSets()
	if got := [2]int32{*rss[0].Spec.Replicas, *rss[1].Spec.Replicas}; got != [2]int32{3, 4} {
		t.Errorf("after scaling to 6: (old, new) = %v, want [3 4]", got)
	}
	for _, rs := range rss {
		if rs.Annotations[DesiredReplicasAnnotation] != "6" || rs.Annotations[MaxReplicasAnnotation] != "7" {
			t.Errorf("%s annotations %v, want desired 6, max 7", rs.Name, rs.Annotations)
		}
	}
}
