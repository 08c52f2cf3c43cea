package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/store"
	"github.com/podlab/podlab/steps/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// cluster is an API server in t.TempDir() and a client per component.
type cluster struct {
	dir                       string
	srv                       *apiserver.Server
	admin, scheduler, kubelet *apiserver.Client
	controllers               *apiserver.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := &cluster{dir: dir, srv: srv}
	for _, u := range []struct {
		name string
		c    **apiserver.Client
	}{
		{"admin", &c.admin}, {"system:kube-scheduler", &c.scheduler},
		{"system:node:node-1", &c.kubelet}, {"system:kube-controller-manager", &c.controllers},
	} {
		if *u.c, err = srv.ClientAs(u.name); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func rv(t *testing.T, obj apiserver.Object) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(obj.GetResourceVersion(), &n); err != nil {
		t.Fatalf("resourceVersion %q: %v", obj.GetResourceVersion(), err)
	}
	return n
}

// want is one expected entry.
type want struct {
	stage, component string
	rev              int64
}

// walk drives pod name through the chain as its components would, with
// no containers: created (by admin, or by the replicaset-controller when
// owner is set), bound by the scheduler with a Scheduled event, its status
// written by node-1's kubelet with the kubelet's events, deleted
// gracefully, stopped, and deleted by the kubelet with grace period 0. It
// returns the entries the trace must show, in order.
func (c *cluster) walk(t *testing.T, ctx context.Context, name string, owner *appsv1.ReplicaSet) []want {
	t.Helper()
	var ws []want
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	creator := c.admin
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		creator = c.controllers
	}
	obj, err := creator.Create(ctx, pod)
	must(t, err)
	pod = obj.(*corev1.Pod)
	ws = append(ws, want{trace.StageCreated, "kube-apiserver", rv(t, pod)})
	if owner != nil {
		rec := apiserver.NewRecorder(c.controllers, "replicaset-controller", "")
		must(t, rec.Event(ctx, owner, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+name))
		ws = append(ws, want{"SuccessfulCreate", "replicaset-controller", c.lastEvent(t, ctx, "SuccessfulCreate", owner.Name)})
	}

	must(t, c.scheduler.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}))
	pod = c.get(t, ctx, name)
	ws = append(ws, want{trace.StageBound, "default-scheduler", rv(t, pod)})
	must(t, apiserver.NewRecorder(c.scheduler, "default-scheduler", "").Event(ctx, pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/"+name+" to node-1"))
	ws = append(ws, want{"Scheduled", "default-scheduler", c.lastEvent(t, ctx, "Scheduled", name)})

	kl := apiserver.NewRecorder(c.kubelet, "kubelet", "node-1")
	event := func(reason, msg string) {
		t.Helper()
		must(t, kl.Event(ctx, pod, corev1.EventTypeNormal, reason, msg))
		ws = append(ws, want{reason, "kubelet/node-1", c.lastEvent(t, ctx, reason, name)})
	}
	status := func(stage string, change func(*corev1.PodStatus)) {
		t.Helper()
		p := c.get(t, ctx, name)
		change(&p.Status)
		obj, err := c.kubelet.UpdateStatus(ctx, p)
		must(t, err)
		pod = obj.(*corev1.Pod)
		ws = append(ws, want{stage, "kubelet/node-1", rv(t, pod)})
	}
	now := func() metav1.Time { return metav1.NewTime(time.Now()) }
	status(trace.StageSandbox, func(s *corev1.PodStatus) {
		t := now()
		s.Phase, s.StartTime = corev1.PodPending, &t
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t})
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "nginx",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	})
	event("Pulling", `Pulling image "nginx"`)
	event("Pulled", `Successfully pulled image "nginx" in 20ms (20ms including waiting). Image size: 1000 bytes.`)
	status(trace.StageStatus, func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].ImageID = "docker.io/library/nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	})
	event("Created", "Created container: app")
	event("Started", "Started container app")
	status(trace.StageRunning, func(s *corev1.PodStatus) {
		t := now()
		s.Phase = corev1.PodRunning
		s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}
		s.ContainerStatuses[0].Ready = true
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t})
	})

	// kubectl delete: graceful, as the pod is on a node
	deleter := c.admin
	if owner != nil {
		deleter = c.controllers
	}
	obj, err = deleter.Delete(ctx, "pods", "default", name, apiserver.DeleteOptions{})
	must(t, err)
	ws = append(ws, want{trace.StageDeleteRequested, "kube-apiserver", rv(t, obj)})
	if owner != nil {
		rec := apiserver.NewRecorder(c.controllers, "replicaset-controller", "")
		must(t, rec.Event(ctx, owner, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+name))
		ws = append(ws, want{"SuccessfulDelete", "replicaset-controller", c.lastEvent(t, ctx, "SuccessfulDelete", owner.Name)})
	}
	pod = obj.(*corev1.Pod)
	event("Killing", "Stopping container app")
	status(trace.StageStatus, func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Completed", StartedAt: s.ContainerStatuses[0].State.Running.StartedAt, FinishedAt: now()}}
		s.ContainerStatuses[0].Ready = false
	})
	zero := int64(0)
	_, err = c.kubelet.Delete(ctx, "pods", "default", name, apiserver.DeleteOptions{GracePeriodSeconds: &zero})
	must(t, err)
	ws = append(ws, want{trace.StageDeleted, "kubelet/node-1", c.revision(t, ctx)})
	return ws
}

func (c *cluster) get(t *testing.T, ctx context.Context, name string) *corev1.Pod {
	t.Helper()
	obj, err := c.admin.Get(ctx, "pods", "default", name)
	must(t, err)
	return obj.(*corev1.Pod)
}

// lastEvent is the revision of the newest event with reason about name.
func (c *cluster) lastEvent(t *testing.T, ctx context.Context, reason, name string) int64 {
	t.Helper()
	list, err := c.admin.List(ctx, "events", "default", apiserver.ListOptions{})
	must(t, err)
	var newest int64
	for _, obj := range list.Items {
		ev := obj.(*corev1.Event)
		if ev.Reason == reason && ev.InvolvedObject.Name == name {
			newest = max(newest, rv(t, ev))
		}
	}
	if newest == 0 {
		t.Fatalf("no event %s about %s", reason, name)
	}
	return newest
}

// revision is the store's current revision.
func (c *cluster) revision(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	list, err := c.admin.List(ctx, "namespaces", "", apiserver.ListOptions{})
	must(t, err)
	var n int64
	_, err = fmt.Sscan(list.ResourceVersion, &n)
	must(t, err)
	return n
}

func check(t *testing.T, tl *trace.Timeline, ws []want) {
	t.Helper()
	var got []want
	for _, e := range tl.Entries {
		got = append(got, want{e.Stage, e.Component, e.Revision})
	}
	if !reflect.DeepEqual(got, ws) {
		t.Errorf("entries:\n got %v\nwant %v", got, ws)
	}
	for i, e := range tl.Entries {
		if i > 0 && e.Revision <= tl.Entries[i-1].Revision {
			t.Errorf("entry %d (%s) at revision %d comes after revision %d", i, e.Stage, e.Revision, tl.Entries[i-1].Revision)
		}
		if e.Time.IsZero() {
			t.Errorf("entry %d (%s) has no time", i, e.Stage)
		}
	}
}

func TestPod_Chain(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	ws := c.walk(t, ctx, "web", nil)
	tl, err := trace.Pod(ctx, c.admin, "default", "web")
	must(t, err)
	check(t, tl, ws)

	if tl.Kind != "Pod" || tl.Name != "web" || tl.Compacted || tl.CompleteAfter != 1 {
		t.Errorf("timeline %s %s compacted=%v after=%d", tl.Kind, tl.Name, tl.Compacted, tl.CompleteAfter)
	}
	if len(tl.Pods) != 1 || tl.Pods[0].Node != "node-1" || tl.Pods[0].Created == nil || tl.Pods[0].Running == nil || tl.Pods[0].Deleted == nil {
		t.Fatalf("pod summary: %+v", tl.Pods)
	}
	p := tl.Pods[0]
	if p.Created.T != 0 || p.Running.T < 0 || p.Deleted.T < p.Running.T {
		t.Errorf("created at T+%s, Running at T+%s, deleted at T+%s", p.Created.T, p.Running.T, p.Deleted.T)
	}
	// Events carry their time in their names: precise, never estimated.
	for _, e := range tl.Entries {
		if e.Resource == "events" && e.Estimated {
			t.Errorf("event %s has an estimated time", e.Stage)
		}
		if e.Resource == "pods" && !e.Estimated {
			t.Errorf("pod write %s has a precise time: objects store seconds only", e.Stage)
		}
	}
	var stretches []string
	for _, s := range tl.Spans {
		stretches = append(stretches, s.From+">"+s.To)
		if s.Took < 0 {
			t.Errorf("stretch %s took %s", s.Name, s.Took)
		}
	}
	if w := []string{"created>bound", "bound>sandbox", "Pulling>Pulled", "Pulled>Created", "Created>Started", "Started>Running", "delete requested>deleted"}; !slices.Equal(stretches, w) {
		t.Errorf("stretches %v, want %v", stretches, w)
	}

	var text bytes.Buffer
	must(t, trace.WriteText(&text, tl))
	t.Logf("text:\n%s", text.String())
	for _, s := range []string{
		"pod default/web (uid " + string(tl.UID) + "), node node-1:",
		"T+ms", "REVISION", "COMPONENT", "STAGE", "DETAIL",
		"kubelet/node-1", "Pulling image \"nginx\"",
		"create -> Running: ~", "create -> deleted: ~",
		"image pull", "The watch log is complete",
	} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text does not say %q", s)
		}
	}
}

// TestPod_Mermaid compares the diagram with testdata/web.mmd (times
// blanked: they change from run to run). go test -update rewrites it.
func TestPod_Mermaid(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	c.walk(t, ctx, "web", nil)
	tl, err := trace.Pod(ctx, c.admin, "default", "web")
	must(t, err)
	var out bytes.Buffer
	must(t, trace.WriteMermaid(&out, tl))
	got := regexp.MustCompile(`T\+~?-?\d+ms`).ReplaceAllString(out.String(), "T+Nms")
	golden := filepath.Join("testdata", "web.mmd")
	if *update {
		must(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	wantB, err := os.ReadFile(golden)
	must(t, err)
	if got != string(wantB) {
		t.Errorf("mermaid differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	// What GitHub's renderer needs: the header, declared participants,
	// and nothing but participant lines, arrows and notes.
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if lines[0] != "sequenceDiagram" {
		t.Errorf("first line %q", lines[0])
	}
	ids := map[string]bool{}
	arrow := regexp.MustCompile(`^([A-Z]+)(->>|-->>)([A-Z]+): [^;#]+$`)
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "participant "):
			f := strings.Fields(l)
			ids[f[1]] = true
		case strings.HasPrefix(l, "Note over "):
		case arrow.MatchString(l):
			m := arrow.FindStringSubmatch(l)
			if !ids[m[1]] || !ids[m[3]] {
				t.Errorf("arrow between undeclared participants: %q", l)
			}
		default:
			t.Errorf("line not of a conservative sequenceDiagram: %q", l)
		}
	}
	if len(ids) != 8 {
		t.Errorf("%d participants, want 8", len(ids))
	}
}

func TestPod_JSONRoundTrips(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	c.walk(t, ctx, "web", nil)
	tl, err := trace.Pod(ctx, c.admin, "default", "web")
	must(t, err)
	var out bytes.Buffer
	must(t, trace.WriteJSON(&out, tl))
	var back []trace.Record
	must(t, json.Unmarshal(out.Bytes(), &back))
	if !reflect.DeepEqual(back, trace.Records(tl)) {
		t.Errorf("JSON does not round-trip:\n%s", out.String())
	}
	if len(back) != len(tl.Entries) {
		t.Fatalf("%d records for %d entries", len(back), len(tl.Entries))
	}
	var raw []map[string]any
	must(t, json.Unmarshal(out.Bytes(), &raw))
	for _, r := range raw {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if w := []string{"component", "detail", "revision", "stage", "t_ms", "time"}; !slices.Equal(keys, w) {
			t.Fatalf("record keys %v, want %v", keys, w)
		}
	}
	if back[0].Stage != trace.StageCreated || back[0].TMs != 0 || back[len(back)-1].Stage != trace.StageDeleted {
		t.Errorf("first %+v, last %+v", back[0], back[len(back)-1])
	}
}

// TestPod_ReplicaSetsPod: the creator is the replicaset-controller, and
// its SuccessfulCreate and SuccessfulDelete are part of the pod's chain.
func TestPod_ReplicaSetsPod(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	one := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-6d9f7c8b4", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}}}
	obj, err := c.admin.Create(ctx, rs)
	must(t, err)
	rs = obj.(*appsv1.ReplicaSet)
	ws := c.walk(t, ctx, "web-6d9f7c8b4-x2kqz", rs)
	tl, err := trace.Pod(ctx, c.admin, "default", "web-6d9f7c8b4-x2kqz")
	must(t, err)
	check(t, tl, ws)
	created := tl.Entries[0]
	if created.Actor != trace.ControllerManager || !strings.Contains(created.Detail, "replicaset-controller") || !strings.Contains(created.Detail, rs.Name) {
		t.Errorf("created by %s: %s", created.Actor, created.Detail)
	}
	for _, e := range tl.Entries {
		if e.Stage == trace.StageDeleteRequested && (e.Actor != trace.ControllerManager || !strings.Contains(e.Detail, "scaling down")) {
			t.Errorf("delete requested by %s: %s", e.Actor, e.Detail)
		}
	}
}

// TestPod_CompactedLog: once the log is compacted, the trace says from
// which revision on it is complete, and keeps what the objects still tell.
func TestPod_CompactedLog(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	c.walk(t, ctx, "web", nil)
	// recreate web, walk it to Running, then compact past its bind
	obj, err := c.admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
	must(t, err)
	must(t, c.scheduler.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: obj.GetUID()},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}))
	bound := c.revision(t, ctx)
	p := c.get(t, ctx, "web")
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	obj, err = c.kubelet.UpdateStatus(ctx, p)
	must(t, err)
	running := rv(t, obj)

	st, err := store.Open(store.Path(c.dir))
	must(t, err)
	must(t, st.Compact(ctx, bound))
	must(t, st.Close())

	tl, err := trace.Pod(ctx, c.admin, "default", "web")
	must(t, err)
	if !tl.Compacted || tl.CompleteAfter != bound {
		t.Errorf("compacted=%v, complete after %d; want after %d", tl.Compacted, tl.CompleteAfter, bound)
	}
	var got []want
	for _, e := range tl.Entries {
		got = append(got, want{e.Stage, e.Component, e.Revision})
	}
	// the binding is the compacted revision itself: the log does not hold
	// it, and no Scheduled event of this pod says who bound it
	w := []want{{trace.StageCreated, "kube-apiserver", 0}, {trace.StageBound, "kube-apiserver", 0}, {trace.StageRunning, "kubelet/node-1", running}}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("entries after compaction:\n got %v\nwant %v", got, w)
	}
	// Over HTTPS, where a watch from a compacted revision is 410 only as
	// the first event of its stream, the trace is the same.
	hs := httptest.NewTLSServer(rest.New(c.srv, rest.WithAuthenticator("token file", c.srv.Tokens())))
	defer hs.Close()
	tok, err := c.srv.Tokens().TokenFor("admin")
	must(t, err)
	rc, err := remote.New(&restclient.Config{Host: hs.URL, BearerToken: tok, TLSClientConfig: restclient.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})}})
	must(t, err)
	overHTTP, err := trace.Pod(ctx, rc, "default", "web")
	must(t, err)
	var gotHTTP []want
	for _, e := range overHTTP.Entries {
		gotHTTP = append(gotHTTP, want{e.Stage, e.Component, e.Revision})
	}
	if !overHTTP.Compacted || overHTTP.CompleteAfter != bound || !reflect.DeepEqual(gotHTTP, w) {
		t.Errorf("over HTTPS: compacted=%v, complete after %d, entries %v; want after %d, %v", overHTTP.Compacted, overHTTP.CompleteAfter, gotHTTP, bound, w)
	}

	var text bytes.Buffer
	must(t, trace.WriteText(&text, tl))
	if !strings.Contains(text.String(), "compacted: it is complete after revision") {
		t.Errorf("text does not say the log was compacted:\n%s", text.String())
	}

	// The first web is gone from the log now: as good as never created,
	// and the error says why.
	_, err = trace.Pod(ctx, c.admin, "default", "ghost")
	if !errors.Is(err, trace.ErrNeverCreated) || !strings.Contains(err.Error(), "compacted") {
		t.Errorf("tracing a pod never created, with a compacted log: %v", err)
	}
}

// TestPod_CompactedBeforeCreate: a pod whose every write is older than the
// compacted revision (lesson 14 compacts the store under a Running web).
// The trace says what compaction removed, and takes the binding and the
// Running from what the pod and its Events still tell: it must not say
// "no scheduler involved" above a Scheduled event, nor "not reached" for a
// Running pod.
func TestPod_CompactedBeforeCreate(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	obj, err := c.admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
	must(t, err)
	must(t, c.scheduler.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: obj.GetUID()},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}))
	p := c.get(t, ctx, "web")
	must(t, apiserver.NewRecorder(c.scheduler, "default-scheduler", "").Event(ctx, p, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/web to node-1"))
	started := metav1.NewTime(time.Now())
	p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &started
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started})
	obj, err = c.kubelet.UpdateStatus(ctx, p)
	must(t, err)
	p = obj.(*corev1.Pod)
	// a write of another object, so that the compacted revision is past
	// every write of web
	_, err = c.admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
	must(t, err)
	at := c.revision(t, ctx)
	if last := rv(t, p); last >= at {
		t.Fatalf("web's last write %d is not before the compacted revision %d", last, at)
	}
	st, err := store.Open(store.Path(c.dir))
	must(t, err)
	must(t, st.Compact(ctx, at))
	must(t, st.Close())

	tl, err := trace.Pod(ctx, c.admin, "default", "web")
	must(t, err)
	stages := map[string]trace.Entry{}
	for _, e := range tl.Entries {
		if e.Resource == "pods" {
			stages[e.Stage] = e
		}
	}
	var text bytes.Buffer
	must(t, trace.WriteText(&text, tl))
	out := text.String()
	cases := []struct {
		name string
		ok   bool
	}{
		{"no \"no scheduler involved\"", !strings.Contains(out, "no scheduler involved")},
		{"says what compaction removed", strings.Contains(out, fmt.Sprintf("the store's history before revision %d was compacted: the pod's creation and binding are not in it", at))},
		{"a binding by the scheduler, from the Scheduled event", stages[trace.StageBound].Component == "default-scheduler" &&
			strings.Contains(stages[trace.StageBound].Detail, "spec.nodeName=node-1")},
		{"Running, from the pod's status", stages[trace.StageRunning].Component == "kubelet/node-1" && stages[trace.StageRunning].Revision == 0},
		{"create -> Running reached", !strings.Contains(out, "create -> Running: not reached") && strings.Contains(out, "create -> Running: ")},
		{"the Scheduled event kept", strings.Contains(out, "Scheduled")},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s:\n%s", c.name, out)
		}
	}
}

// TestDeployment merges a Deployment's pods.
func TestDeployment(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	one := int32(1)
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	obj, err := c.admin.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}})
	must(t, err)
	dep := obj.(*appsv1.Deployment)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-6d9f7c8b4", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	obj, err = c.controllers.Create(ctx, rs)
	must(t, err)
	rs = obj.(*appsv1.ReplicaSet)
	c.walk(t, ctx, "web-6d9f7c8b4-x2kqz", rs)
	c.walk(t, ctx, "web-6d9f7c8b4-b7tzd", rs)

	tl, err := trace.Deployment(ctx, c.admin, "default", "web")
	must(t, err)
	if tl.Kind != "Deployment" || len(tl.Pods) != 2 || tl.Entries[0].Object != "deployment/web" || tl.Entries[1].Object != "replicaset/web-6d9f7c8b4" {
		t.Fatalf("deployment timeline: %+v", tl.Entries[:2])
	}
	for _, p := range tl.Pods {
		if p.Running == nil || p.Deleted == nil {
			t.Errorf("pod %s: Running %v, deleted %v", p.Name, p.Running, p.Deleted)
		}
	}
	var out bytes.Buffer
	must(t, trace.WriteText(&out, tl))
	t.Logf("deployment:\n%s", out.String())
	if !strings.Contains(out.String(), "create -> the last pod Running") {
		t.Errorf("text:\n%s", out.String())
	}
}

func TestPod_BadInputs(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t)
	_, err := trace.Pod(ctx, c.admin, "default", "nope")
	if !errors.Is(err, trace.ErrNeverCreated) || !strings.Contains(err.Error(), "pod default/nope") {
		t.Errorf("no such pod: %v", err)
	}
	_, err = trace.Deployment(ctx, c.admin, "default", "nope")
	if !errors.Is(err, trace.ErrNeverCreated) {
		t.Errorf("no such deployment: %v", err)
	}
	// the developer may edit in namespace default only
	dev, err := c.srv.ClientAs("developer")
	must(t, err)
	if _, err := trace.Pod(ctx, dev, "kube-system", "x"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "run it as admin") {
		t.Errorf("the developer tracing pods in kube-system: %v", err)
	}
	var out bytes.Buffer
	err = trace.Write(&out, &trace.Timeline{Kind: "Pod"}, "xml")
	if !errors.Is(err, trace.ErrFormat) || !strings.Contains(err.Error(), "text, mermaid, json") {
		t.Errorf("-o xml: %v", err)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want trace.Target
	}{
		{"kind/name", []string{"pod/web"}, trace.Target{Kind: "Pod", Name: "web"}},
		{"a name alone is a pod", []string{"web"}, trace.Target{Kind: "Pod", Name: "web"}},
		{"short name", []string{"po/web"}, trace.Target{Kind: "Pod", Name: "web"}},
		{"kind then name", []string{"pods", "web"}, trace.Target{Kind: "Pod", Name: "web"}},
		{"deployment", []string{"deployment/web"}, trace.Target{Kind: "Deployment", Name: "web"}},
		{"deploy", []string{"deploy", "web"}, trace.Target{Kind: "Deployment", Name: "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trace.ParseTarget(tc.args)
			if err != nil || got != tc.want {
				t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"nothing", nil, "trace what?"},
		{"no name", []string{"pod/"}, "names no object"},
		{"a replicaset", []string{"replicaset/web"}, "podlab trace follows pods and deployments"},
		{"unknown kind", []string{"gadget/web"}, "doesn't have a resource type"},
		{"too many", []string{"pod/web", "pod/db"}, "trace one object"},
	} {
		t.Run("bad/"+tc.name, func(t *testing.T) {
			_, err := trace.ParseTarget(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ParseTarget(%q) = %v; want an error saying %q", tc.args, err, tc.says)
			}
		})
	}
}
