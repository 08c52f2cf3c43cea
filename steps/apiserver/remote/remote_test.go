package remote_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/store"
)

// lab is a state directory's API server, both in-process and behind an
// HTTPS test server.
type lab struct {
	t   testing.TB
	s   *apiserver.Server
	srv *httptest.Server

	mu      sync.Mutex
	ends    []context.CancelFunc // ends the watches being served
	handler http.Handler
	again   *http.Server // serving on srv's address after setDown(false)
}

func newLab(t testing.TB, storeOpts ...store.Option) *lab {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	s, err := apiserver.OpenWith(dir, storeOpts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	l := &lab{t: t, s: s}
	h := rest.New(s, rest.WithAuthenticator("token file", s.Tokens()))
	l.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "" {
			wctx, end := context.WithCancel(r.Context())
			defer end()
			l.mu.Lock()
			l.ends = append(l.ends, end)
			l.mu.Unlock()
			r = r.WithContext(wctx)
		}
		h.ServeHTTP(w, r)
	})
	l.srv = httptest.NewTLSServer(l.handler)
	t.Cleanup(func() {
		l.srv.CloseClientConnections()
		l.srv.Close()
		l.mu.Lock()
		if l.again != nil {
			l.again.Close()
		}
		l.mu.Unlock()
		s.Close()
	})
	return l
}

// setDown stops the server (true: nothing listens on its port, its
// connections and watches end), or serves again on the same address, with
// the same certificate (false), as a restarted API server.
func (l *lab) setDown(down bool) {
	l.t.Helper()
	if down {
		l.srv.Listener.Close()
		l.endWatches()
		l.srv.CloseClientConnections()
		return
	}
	ln, err := net.Listen("tcp", l.srv.Listener.Addr().String())
	if err != nil {
		l.t.Fatalf("serving again on %s: %v", l.srv.Listener.Addr(), err)
	}
	srv := &http.Server{Handler: l.handler}
	l.mu.Lock()
	l.again = srv
	l.mu.Unlock()
	go srv.Serve(tls.NewListener(ln, l.srv.TLS))
}

// endWatches ends every watch being served, as a server's timeout does.
func (l *lab) endWatches() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, end := range l.ends {
		end()
	}
	l.ends = nil
}

func (l *lab) token(user string) string {
	l.t.Helper()
	tok, err := l.s.Tokens().TokenFor(user)
	if err != nil {
		l.t.Fatal(err)
	}
	return tok
}

func (l *lab) config(user string) *restclient.Config {
	return &restclient.Config{Host: l.srv.URL, BearerToken: l.token(user), QPS: -1,
		TLSClientConfig: restclient.TLSClientConfig{
			CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.srv.Certificate().Raw})}}
}

func (l *lab) remote(user string) *remote.Client {
	l.t.Helper()
	c, err := remote.New(l.config(user))
	if err != nil {
		l.t.Fatalf("remote.New: %v", err)
	}
	return c
}

func (l *lab) inProcess(user string) apiserver.Interface {
	l.t.Helper()
	c, err := l.s.ClientAs(user)
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	}
}

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

func testNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// must runs setup steps, failing the test on an error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
}

// normalize clears what two labs cannot share: uids and times.
// appliedPod is a pod as a server-side apply sends it, labelled app=label.
func appliedPod(label string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"` + label + `"}},"spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}`)
}

func normalize(obj apiserver.Object) {
	if obj == nil {
		return
	}
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	if obj.GetDeletionTimestamp() != nil {
		obj.SetDeletionTimestamp(&metav1.Time{})
	}
	obj.SetManagedFields(nil)
	if p, ok := obj.(*corev1.Pod); ok {
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].LastTransitionTime = metav1.Time{}
			p.Status.Conditions[i].LastProbeTime = metav1.Time{}
		}
		p.Status.StartTime = nil
	}
}

// sameError: both nil, or the same status (code, reason, message, details)
// or, for errors made before any request, the same text.
func sameError(t *testing.T, local, wire error) {
	t.Helper()
	if (local == nil) != (wire == nil) {
		t.Fatalf("in-process error %v, remote error %v", local, wire)
	}
	if local == nil {
		return
	}
	var ls, ws apierrors.APIStatus
	if errors.As(local, &ls) {
		if !errors.As(wire, &ws) {
			t.Fatalf("remote error %q (%T) is not a status error; in-process: %v", wire, wire, local)
		}
		l, w := ls.Status(), ws.Status()
		l.TypeMeta, w.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
		if l.Code != w.Code || l.Reason != w.Reason || l.Message != w.Message {
			t.Fatalf("remote error %d %s %q, in-process %d %s %q", w.Code, w.Reason, w.Message, l.Code, l.Reason, l.Message)
		}
		return
	}
	if local.Error() != wire.Error() {
		t.Fatalf("remote error %q, in-process %q", wire, local)
	}
}

// Each operation of apiserver.Interface, run on two identical labs, one
// through the in-process client and one over HTTPS, returns the same
// object (but for uids and times) and the same error.
func TestClient_SameAsInProcess(t *testing.T) {
	stale := func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
		p, err := c.Get(ctx, "pods", "default", "web")
		if err != nil {
			return nil, err
		}
		p.SetLabels(map[string]string{"v": "2"})
		if _, err := c.Update(ctx, p.DeepCopyObject().(apiserver.Object)); err != nil {
			return nil, err
		}
		p.SetLabels(map[string]string{"v": "3"})
		return c.Update(ctx, p) // p's resourceVersion is now stale
	}
	tests := []struct {
		name  string
		user  string // "" is admin
		setup func(c apiserver.Interface, ctx context.Context) error
		op    func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error)
		want  func(error) bool // nil: no error
	}{
		{name: "create pod",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Create(ctx, testPod("web"))
			}},
		{name: "create cluster-scoped node",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Create(ctx, testNode("node-1"))
			}},
		{name: "create deployment in the default namespace when none is named",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				d := testDeployment("web")
				d.Namespace = ""
				return c.Create(ctx, d)
			}},
		{name: "create existing is AlreadyExists",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Create(ctx, testPod("web"))
			},
			want: apierrors.IsAlreadyExists},
		{name: "create without containers is Invalid",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				p := testPod("web")
				p.Spec.Containers = nil
				return c.Create(ctx, p)
			},
			want: apierrors.IsInvalid},
		{name: "create as viewer is Forbidden", user: "viewer",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Create(ctx, testPod("web"))
			},
			want: apierrors.IsForbidden},
		{name: "get pod",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Get(ctx, "pods", "", "web")
			}},
		{name: "get by short name", user: "viewer",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Get(ctx, "ns", "", "default")
			}},
		{name: "get missing is NotFound",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Get(ctx, "pods", "default", "nothing")
			},
			want: apierrors.IsNotFound},
		{name: "get unknown resource",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Get(ctx, "widgets", "default", "x")
			},
			want: func(err error) bool { return strings.Contains(err.Error(), "widgets") }},
		{name: "update",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				p, err := c.Get(ctx, "pods", "default", "web")
				if err != nil {
					return nil, err
				}
				p.SetLabels(map[string]string{"v": "2"})
				return c.Update(ctx, p)
			}},
		{name: "update with a stale resourceVersion is Conflict",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: stale, want: apierrors.IsConflict},
		{name: "update status",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				o, err := c.Get(ctx, "pods", "default", "web")
				if err != nil {
					return nil, err
				}
				p := o.(*corev1.Pod)
				p.Status.Phase = corev1.PodRunning
				p.Status.PodIP = "10.88.0.5"
				return c.UpdateStatus(ctx, p)
			}},
		{name: "strategic merge patch",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "pods", "default", "web", types.StrategicMergePatchType,
					[]byte(`{"metadata":{"labels":{"tier":"front"}}}`), apiserver.PatchOptions{})
			}},
		{name: "server-side apply by another manager is a conflict",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Patch(ctx, "pods", "default", "web", types.ApplyPatchType, appliedPod("a"), apiserver.PatchOptions{FieldManager: "alice"})
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "pods", "default", "web", types.ApplyPatchType, appliedPod("b"), apiserver.PatchOptions{FieldManager: "bob"})
			},
			want: apierrors.IsConflict},
		{name: "server-side apply with force takes the field",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Patch(ctx, "pods", "default", "web", types.ApplyPatchType, appliedPod("a"), apiserver.PatchOptions{FieldManager: "alice"})
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "pods", "default", "web", types.ApplyPatchType, appliedPod("b"), apiserver.PatchOptions{FieldManager: "bob", Force: true})
			}},
		{name: "json patch of a missing path is Invalid",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "pods", "default", "web", types.JSONPatchType,
					[]byte(`[{"op":"replace","path":"/spec/nothing/0","value":1}]`), apiserver.PatchOptions{})
			},
			want: func(err error) bool { return err != nil }},
		{name: "merge patch of a deployment's scale",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testDeployment("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "deployments", "default", "web", types.MergePatchType,
					[]byte(`{"spec":{"replicas":5}}`), apiserver.PatchOptions{Subresource: "scale"})
			}},
		{name: "patch as viewer is Forbidden", user: "viewer",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Patch(ctx, "namespaces", "", "default", types.MergePatchType,
					[]byte(`{"metadata":{"labels":{"a":"b"}}}`), apiserver.PatchOptions{})
			},
			want: apierrors.IsForbidden},
		{name: "bind, then get",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				if _, err := c.Create(ctx, testNode("node-1")); err != nil {
					return err
				}
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
					Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
				if err := c.Bind(ctx, b); err != nil {
					return nil, err
				}
				return c.Get(ctx, "pods", "default", "web")
			}},
		{name: "bind a bound pod is Conflict",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				if _, err := c.Create(ctx, testNode("node-1")); err != nil {
					return err
				}
				p := testPod("web")
				p.Spec.NodeName = "node-1"
				_, err := c.Create(ctx, p)
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return nil, c.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
					Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}})
			},
			want: apierrors.IsConflict},
		{name: "delete an unbound pod: gone",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, testPod("web"))
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Delete(ctx, "pods", "default", "web", apiserver.DeleteOptions{})
			}},
		{name: "delete a bound pod: marked, with the grace period asked",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				p := testPod("web")
				p.Spec.NodeName = "node-1"
				_, err := c.Create(ctx, p)
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Delete(ctx, "pods", "default", "web", apiserver.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7)})
			}},
		{name: "delete a bound pod with force: gone",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				p := testPod("web")
				p.Spec.NodeName = "node-1"
				_, err := c.Create(ctx, p)
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				if _, err := c.Delete(ctx, "pods", "default", "web", apiserver.DeleteOptions{Force: true}); err != nil {
					return nil, err
				}
				return c.Get(ctx, "pods", "default", "web")
			},
			want: apierrors.IsNotFound},
		{name: "delete a namespace: terminating",
			setup: func(c apiserver.Interface, ctx context.Context) error {
				_, err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
				return err
			},
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Delete(ctx, "namespaces", "", "team", apiserver.DeleteOptions{})
			}},
		{name: "delete missing is NotFound",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Delete(ctx, "pods", "default", "nothing", apiserver.DeleteOptions{})
			},
			want: apierrors.IsNotFound},
		{name: "delete as viewer is Forbidden", user: "viewer",
			op: func(c apiserver.Interface, ctx context.Context) (apiserver.Object, error) {
				return c.Delete(ctx, "namespaces", "", "default", apiserver.DeleteOptions{})
			},
			want: apierrors.IsForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			user := tt.user
			if user == "" {
				user = "admin"
			}
			local, wire := newLab(t), newLab(t)
			lc, wc := local.inProcess(user), apiserver.Interface(wire.remote(user))
			if tt.setup != nil {
				must(t, tt.setup(local.inProcess("admin"), ctx))
				must(t, tt.setup(wire.remote("admin"), ctx))
			}
			lo, lerr := tt.op(lc, ctx)
			wo, werr := tt.op(wc, ctx)
			sameError(t, lerr, werr)
			if tt.want == nil && werr != nil {
				t.Fatalf("remote: %v", werr)
			}
			if tt.want != nil && !tt.want(werr) {
				t.Fatalf("remote error %v, not the one wanted", werr)
			}
			if (lo == nil) != (wo == nil) {
				t.Fatalf("in-process returned %v, remote %v", lo, wo)
			}
			if lo == nil {
				return
			}
			if lt, wt := fmt.Sprintf("%T", lo), fmt.Sprintf("%T", wo); lt != wt {
				t.Fatalf("remote returned a %s, in-process a %s", wt, lt)
			}
			if wo.GetObjectKind().GroupVersionKind().Kind == "" {
				t.Errorf("remote object has no kind: %#v", wo.GetObjectKind())
			}
			normalize(lo)
			normalize(wo)
			if d := diff.Diff(lo, wo); d != "" {
				t.Errorf("remote object differs from the in-process one (-in-process +remote):\n%s", d)
			}
		})
	}
}

// List returns the same typed items, with kinds, and a resourceVersion
// to watch from.
func TestClient_List(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct {
		name      string
		resource  string
		namespace string
		opts      apiserver.ListOptions
		want      []string
	}{
		{"all pods", "pods", "", apiserver.ListOptions{}, []string{"a", "b", "c"}},
		{"label selector", "po", "default", apiserver.ListOptions{LabelSelector: "tier=web"}, []string{"b", "c"}},
		{"field selector", "pods", "default", apiserver.ListOptions{FieldSelector: "metadata.name=a"}, []string{"a"}},
		{"cluster-scoped", "namespaces", "ignored", apiserver.ListOptions{FieldSelector: "metadata.name=default"}, []string{"default"}},
		{"a page", "pods", "default", apiserver.ListOptions{Limit: 2}, []string{"a", "b"}},
	}
	local, wire := newLab(t), newLab(t)
	lc, wc := local.inProcess("admin"), wire.remote("admin")
	for i, name := range []string{"a", "b", "c"} {
		for _, c := range []apiserver.Interface{lc, wc} {
			p := testPod(name)
			p.Labels["tier"] = []string{"db", "web", "web"}[i]
			must(t, ignore(c.Create(ctx, p)))
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ll, lerr := lc.List(ctx, tt.resource, tt.namespace, tt.opts)
			wl, werr := wc.List(ctx, tt.resource, tt.namespace, tt.opts)
			sameError(t, lerr, werr)
			if werr != nil {
				t.Fatal(werr)
			}
			var names []string
			for _, o := range wl.Items {
				names = append(names, o.GetName())
				if o.GetObjectKind().GroupVersionKind().Kind == "" {
					t.Errorf("item %s has no kind", o.GetName())
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("remote listed %v, want %v", names, tt.want)
			}
			if wl.ResourceVersion == "" || wl.ResourceVersion != ll.ResourceVersion {
				t.Errorf("remote list resourceVersion %q, in-process %q", wl.ResourceVersion, ll.ResourceVersion)
			}
			if wl.Continue != ll.Continue || fmt.Sprint(ptr.Deref(wl.RemainingItemCount, -1)) != fmt.Sprint(ptr.Deref(ll.RemainingItemCount, -1)) ||
				(tt.opts.Limit > 0) != (wl.Continue != "" && wl.RemainingItemCount != nil && *wl.RemainingItemCount == 1) {
				t.Errorf("remote list continue %q remaining %d, in-process %q %d", wl.Continue, ptr.Deref(wl.RemainingItemCount, -1), ll.Continue, ptr.Deref(ll.RemainingItemCount, -1))
			}
			for i := range ll.Items {
				normalize(ll.Items[i])
				normalize(wl.Items[i])
			}
			if d := diff.Diff(ll.Items, wl.Items); d != "" {
				t.Errorf("remote items differ (-in-process +remote):\n%s", d)
			}
		})
	}
	_, err := wire.remote("viewer").List(ctx, "clusterroles", "", apiserver.ListOptions{LabelSelector: "a in b"})
	_, lerr := local.inProcess("viewer").List(ctx, "clusterroles", "", apiserver.ListOptions{LabelSelector: "a in b"})
	sameError(t, lerr, err)
}

func ignore(_ apiserver.Object, err error) error { return err }

// next is the next event of a watcher.
func next(t *testing.T, w apiserver.Watcher) apiserver.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("the watch ended: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return apiserver.WatchEvent{}
}

// A watch from a list's resourceVersion sees ADDED, MODIFIED and DELETED
// in order, typed pods at the revisions of the writes.
func TestClient_Watch_InOrder(t *testing.T) {
	// cancelled before the lab closes: a live watch would resume and hold the server open
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	l := newLab(t)
	c := l.remote("admin")
	list, err := c.List(ctx, "pods", "default", apiserver.ListOptions{})
	must(t, err)
	w, err := c.Watch(ctx, "pods", "default", apiserver.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	created, err := c.Create(ctx, testPod("web"))
	must(t, err)
	created.SetLabels(map[string]string{"v": "2"})
	updated, err := c.Update(ctx, created)
	must(t, err)
	_, err = c.Delete(ctx, "pods", "default", "web", apiserver.DeleteOptions{})
	must(t, err)
	for _, want := range []struct {
		typ apiserver.EventType
		rv  string
	}{{apiserver.Added, created.GetResourceVersion()}, {apiserver.Modified, updated.GetResourceVersion()}, {apiserver.Deleted, ""}} {
		ev := next(t, w)
		pod, ok := ev.Object.(*corev1.Pod)
		if ev.Type != want.typ || !ok || pod.Name != "web" || pod.Kind != "Pod" {
			t.Fatalf("event %s %T %v, want %s of pod web with its kind", ev.Type, ev.Object, ev.Object.GetObjectKind(), want.typ)
		}
		if want.rv != "" && pod.ResourceVersion != want.rv {
			t.Errorf("%s at resourceVersion %s, want %s", ev.Type, pod.ResourceVersion, want.rv)
		}
	}
}

// A watch without a resourceVersion starts from now, as the in-process
// one: no ADDED event for what exists already.
func TestClient_Watch_FromNow(t *testing.T) {
	// cancelled before the lab closes: a live watch would resume and hold the server open
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	for _, tc := range []struct {
		name string
		c    func(l *lab) apiserver.Interface
	}{
		{"in-process", func(l *lab) apiserver.Interface { return l.inProcess("admin") }},
		{"remote", func(l *lab) apiserver.Interface { return l.remote("admin") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			c := tc.c(newLab(t))
			must(t, ignore(c.Create(ctx, testPod("old"))))
			w, err := c.Watch(ctx, "pods", "", apiserver.ListOptions{})
			must(t, err)
			must(t, ignore(c.Create(ctx, testPod("new"))))
			if ev := next(t, w); ev.Type != apiserver.Added || ev.Object.GetName() != "new" {
				t.Errorf("first event %s of %s, want ADDED of new", ev.Type, ev.Object.GetName())
			}
		})
	}
}

// A watch from a revision the store has compacted ends with 410 Expired,
// from Watch or from the watcher's Err, in-process and over the wire.
func TestClient_Watch_CompactedIsExpired(t *testing.T) {
	// cancelled before the lab closes: a live watch would resume and hold the server open
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	for _, tc := range []struct {
		name string
		c    func(l *lab) apiserver.Interface
	}{
		{"in-process", func(l *lab) apiserver.Interface { return l.inProcess("admin") }},
		{"remote", func(l *lab) apiserver.Interface { return l.remote("admin") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			c := tc.c(newLab(t, store.WithHistory(5)))
			for i := range 10 {
				must(t, ignore(c.Create(ctx, testPod(fmt.Sprintf("p%d", i)))))
			}
			w, err := c.Watch(ctx, "pods", "default", apiserver.ListOptions{ResourceVersion: "2"})
			if err == nil {
				for ev := range w.Events() {
					t.Errorf("event %s of %s from a compacted revision", ev.Type, ev.Object.GetName())
				}
				err = w.Err()
			}
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("watch from a compacted revision: %v, want 410 Expired", err)
			}
		})
	}
}

// Cancelling the context ends the watch cleanly: Events closes, Err is nil.
func TestClient_Watch_EndsOnCancel(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	w, err := l.remote("admin").Watch(ctx, "pods", "", apiserver.ListOptions{})
	must(t, err)
	cancel()
	select {
	case _, ok := <-w.Events():
		if ok {
			t.Fatal("an event after cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end 10s after its context")
	}
	if err := w.Err(); err != nil {
		t.Errorf("Err after cancel: %v, want nil", err)
	}
}

// When the server ends the stream (its timeout, a restart), the watch
// resumes from the last resourceVersion: the caller misses nothing.
func TestClient_Watch_ResumesWhenTheServerEndsTheStream(t *testing.T) {
	// cancelled before the lab closes: a live watch would resume and hold the server open
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	l := newLab(t)
	c := l.remote("admin")
	w, err := c.Watch(ctx, "pods", "", apiserver.ListOptions{})
	must(t, err)
	must(t, ignore(c.Create(ctx, testPod("a"))))
	if ev := next(t, w); ev.Object.GetName() != "a" {
		t.Fatalf("event of %s, want a", ev.Object.GetName())
	}
	l.endWatches()
	must(t, ignore(c.Create(ctx, testPod("b"))))
	if ev := next(t, w); ev.Type != apiserver.Added || ev.Object.GetName() != "b" {
		t.Fatalf("after the server ended the stream: %s of %s, want ADDED of b", ev.Type, ev.Object.GetName())
	}
}

// Watch as a user RBAC does not let watch is Forbidden, from Watch itself.
func TestClient_Watch_Forbidden(t *testing.T) {
	// cancelled before the lab closes: a live watch would resume and hold the server open
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	l := newLab(t)
	_, lerr := l.inProcess("viewer").Watch(ctx, "clusterroles", "", apiserver.ListOptions{})
	_, werr := l.remote("viewer").Watch(ctx, "clusterroles", "", apiserver.ListOptions{})
	if lerr == nil {
		t.Fatal("the in-process client let the viewer watch clusterroles: this test needs a watch the viewer is denied")
	}
	sameError(t, lerr, werr)
}

// A kubeconfig as `podlab init` writes one: server, CA and credentials.
func TestFromKubeconfig(t *testing.T) {
	ctx := testCtx(t)
	l := newLab(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["podlab"] = &clientcmdapi.Cluster{Server: l.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.srv.Certificate().Raw})}
	cfg.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{Token: l.token("viewer")}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "podlab", AuthInfo: "viewer"}
	cfg.CurrentContext = "default"
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	must(t, clientcmd.WriteToFile(*cfg, path))
	c, err := remote.FromKubeconfig(path)
	if err != nil {
		t.Fatalf("FromKubeconfig: %v", err)
	}
	if _, err := c.Get(ctx, "namespaces", "", "default"); err != nil {
		t.Errorf("Get as viewer: %v", err)
	}
	if _, err := c.Create(ctx, testPod("web")); !apierrors.IsForbidden(err) {
		t.Errorf("Create as viewer: %v, want Forbidden", err)
	}
}

// Bad input gets an error that says what was wrong and what to do.
func TestClient_BadInput(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.kubeconfig")
	must(t, os.WriteFile(garbage, []byte("{not yaml: ["), 0o600))
	tests := []struct {
		name string
		run  func() error
		is   error    // nil: no sentinel to check
		says []string // the error names these
	}{
		{"kubeconfig that does not exist", func() error {
			_, err := remote.FromKubeconfig(filepath.Join(dir, "nothing.kubeconfig"))
			return err
		}, remote.ErrNoKubeconfig, []string{"nothing.kubeconfig", "podlab init"}},
		{"kubeconfig that does not parse", func() error {
			_, err := remote.FromKubeconfig(garbage)
			return err
		}, nil, []string{"garbage.kubeconfig"}},
		{"no config", func() error {
			_, err := remote.New(nil)
			return err
		}, nil, []string{"no server"}},
		{"unreachable server", func() error {
			c, err := remote.New(&restclient.Config{Host: "https://127.0.0.1:1"})
			if err != nil {
				return err
			}
			_, err = c.Get(ctx, "pods", "default", "web")
			return err
		}, remote.ErrUnreachable, []string{"https://127.0.0.1:1", "podlab apiserver"}},
		{"unreachable server, watch", func() error {
			c, err := remote.New(&restclient.Config{Host: "https://127.0.0.1:1"})
			if err != nil {
				return err
			}
			_, err = c.Watch(ctx, "pods", "", apiserver.ListOptions{})
			return err
		}, remote.ErrUnreachable, []string{"https://127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil {
				t.Fatal("no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// With WithReconnect, a watch outlives its API server going away: it
// tries again with back-off, resumes from its last resourceVersion when
// the server answers again, and misses nothing; the notice hears of the
// outage once and of the return once, however many tries failed between.
// Without it, the watch ends with ErrUnreachable.
func TestClient_Watch_ReconnectsAfterTheServerComesBack(t *testing.T) {
	tests := []struct {
		name      string
		reconnect bool
	}{
		{"with WithReconnect: resumes", true},
		{"without: ends with ErrUnreachable", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			l := newLab(t)
			var (
				mu      sync.Mutex
				notices []error
			)
			var opts []remote.Option
			if tt.reconnect {
				opts = append(opts, remote.WithReconnect(func(err error) {
					mu.Lock()
					notices = append(notices, err)
					mu.Unlock()
				}))
			}
			c, err := remote.New(l.config("admin"), opts...)
			must(t, err)
			w, err := c.Watch(ctx, "pods", "", apiserver.ListOptions{})
			must(t, err)
			admin := l.inProcess("admin")
			must(t, ignore(admin.Create(ctx, testPod("a"))))
			if ev := next(t, w); ev.Object.GetName() != "a" {
				t.Fatalf("event of %s, want a", ev.Object.GetName())
			}
			l.setDown(true)
			// written while the server does not answer: the resumed
			// watch must deliver it
			must(t, ignore(admin.Create(ctx, testPod("b"))))
			if !tt.reconnect {
				for ev := range w.Events() {
					t.Errorf("an event (%s of %s) after the server went away", ev.Type, ev.Object.GetName())
				}
				if err := w.Err(); !errors.Is(err, remote.ErrUnreachable) {
					t.Fatalf("watch without WithReconnect after the server went away: %v, want ErrUnreachable", err)
				}
				return
			}
			time.Sleep(2 * time.Second) // a few failed tries
			l.setDown(false)
			if ev := next(t, w); ev.Type != apiserver.Added || ev.Object.GetName() != "b" {
				t.Fatalf("after the server came back: %s of %s, want ADDED of b", ev.Type, ev.Object.GetName())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(notices) != 2 || !errors.Is(notices[0], remote.ErrUnreachable) || notices[1] != nil {
				t.Errorf("notices %v, want [ErrUnreachable, nil]: one when the server went away, one when it came back", notices)
			}
		})
	}
}

// Ping says whether anything serves the API: nil for an answer, even a
// 401, ErrUnreachable naming the server for none; WaitForServer returns
// once the server answers.
func TestClient_PingAndWaitForServer(t *testing.T) {
	ctx := testCtx(t)
	l := newLab(t)
	anon := l.config("admin")
	anon.BearerToken = "not-a-token"
	c, err := remote.New(anon)
	must(t, err)
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping with a token the server refuses: %v, want nil (it answered 401)", err)
	}
	l.setDown(true)
	if err := c.Ping(ctx); !errors.Is(err, remote.ErrUnreachable) || !strings.Contains(err.Error(), l.srv.URL) {
		t.Errorf("Ping of a server that does not answer: %v, want ErrUnreachable naming %s", err, l.srv.URL)
	}
	go func() {
		time.Sleep(time.Second)
		l.setDown(false)
	}()
	if err := c.WaitForServer(ctx); err != nil {
		t.Errorf("WaitForServer: %v", err)
	}
}
