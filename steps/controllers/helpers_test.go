package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
)

// lab is a real API server in a temporary state dir, an admin client (the
// user, and the kubelet's stand-in: it marks pods Ready, binds and
// force-deletes them), the controller-manager's own client, and the log.
type lab struct {
	t     *testing.T
	ctx   context.Context
	srv   *apiserver.Server
	admin apiserver.Interface
	cm    apiserver.Interface
	log   *testenv.SyncBuffer
}

func newLab(t *testing.T, opts ...apiserver.Option) *lab {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := apiserver.Init(ctx, dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	srv, err := apiserver.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	admin, err := srv.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	cm, err := srv.ClientAs(User)
	if err != nil {
		t.Fatal(err)
	}
	return &lab{t: t, ctx: ctx, srv: srv, admin: admin, cm: cm, log: &testenv.SyncBuffer{}}
}

// manager is a controller-manager logging at -v=4 into the lab's log.
func (l *lab) manager(c apiserver.Interface, opts ...Option) *Manager {
	return New(c, klog.New(l.log, klog.WithVerbosity(4)), opts...)
}

// once runs one `controller-manager --once` and fails the test unless it
// settled.
func (l *lab) once() *Report {
	l.t.Helper()
	rep, err := l.manager(l.cm).Once(l.ctx)
	if err != nil {
		l.t.Fatalf("Once: %v\nlog:\n%s", err, tail(l.log.String(), 40))
	}
	if !rep.Settled {
		l.t.Fatalf("Once did not settle: %+v", rep)
	}
	return rep
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func ptr[T any](v T) *T { return &v }

// deployment is web: app=web, nginx:1.25, RollingUpdate with the given
// surge and unavailability (nil: the API server's 25% defaults).
func deployment(name string, replicas int32, surge, unavailable *intstr.IntOrString) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
			},
		},
	}
	if surge != nil || unavailable != nil {
		d.Spec.Strategy = appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable},
		}
	}
	return d
}

func (l *lab) create(obj apiserver.Object) apiserver.Object {
	l.t.Helper()
	out, err := l.admin.Create(l.ctx, obj)
	if err != nil {
		l.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	return out
}

func (l *lab) getDeployment(name string) *appsv1.Deployment {
	l.t.Helper()
	o, err := l.admin.Get(l.ctx, "deployments", "default", name)
	if err != nil {
		l.t.Fatal(err)
	}
	return o.(*appsv1.Deployment)
}

// updateDeployment changes a Deployment as a user would (kubectl edit),
// reading it again when a running controller wrote it meanwhile.
func (l *lab) updateDeployment(name string, change func(*appsv1.Deployment)) {
	l.t.Helper()
	for try := 0; ; try++ {
		d := l.getDeployment(name)
		change(d)
		_, err := l.admin.Update(l.ctx, d)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || try == 10 {
			l.t.Fatalf("updating deployment %s: %v", name, err)
		}
	}
}

func (l *lab) replicaSets() []*appsv1.ReplicaSet {
	l.t.Helper()
	list, err := l.admin.List(l.ctx, "replicasets", "default", apiserver.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for _, o := range list.Items {
		out = append(out, o.(*appsv1.ReplicaSet))
	}
	byCreation(out)
	return out
}

// pods lists the pods of the namespace, optionally only those with
// pod-template-hash=hash.
func (l *lab) pods(hash string) []*corev1.Pod {
	l.t.Helper()
	opts := apiserver.ListOptions{}
	if hash != "" {
		opts.LabelSelector = PodTemplateHashLabel + "=" + hash
	}
	list, err := l.admin.List(l.ctx, "pods", "default", opts)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []*corev1.Pod
	for _, o := range list.Items {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

// markReady does a kubelet's part: the pod runs and is Ready.
func (l *lab) markReady(p *corev1.Pod) {
	l.t.Helper()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	now := metav1.Now()
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
	if _, err := l.admin.UpdateStatus(l.ctx, p); err != nil {
		l.t.Fatalf("marking pod %s ready: %v", p.Name, err)
	}
}

func (l *lab) markAllReady() {
	l.t.Helper()
	for _, p := range l.pods("") {
		if p.DeletionTimestamp == nil && !isPodReady(p) {
			l.markReady(p)
		}
	}
}

// bind does the scheduler's part.
func (l *lab) bind(p *corev1.Pod) {
	l.t.Helper()
	err := l.admin.Bind(l.ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: apiserver.HostNode},
	})
	if err != nil {
		l.t.Fatalf("binding %s: %v", p.Name, err)
	}
}

// finish does the kubelet's part of a graceful deletion: the containers
// stopped, the pod goes for good.
func (l *lab) finish(p *corev1.Pod) {
	l.t.Helper()
	if _, err := l.admin.Delete(l.ctx, "pods", p.Namespace, p.Name, apiserver.DeleteOptions{GracePeriodSeconds: ptr(int64(0)), Force: true}); err != nil {
		l.t.Fatalf("removing pod %s: %v", p.Name, err)
	}
}

func hashOf(rs *appsv1.ReplicaSet) string { return rs.Labels[PodTemplateHashLabel] }

func activePods(pods []*corev1.Pod) (active, ready int) {
	for _, p := range pods {
		if isPodActive(p) {
			active++
			if isPodReady(p) {
				ready++
			}
		}
	}
	return active, ready
}
