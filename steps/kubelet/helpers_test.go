package kubelet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/internal/testenv/noderuntime"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// TestMain turns the test binary into podlab's shim when the runtime starts
// it as one (Config.Shim is this binary), and stops the shared registry.
func TestMain(m *testing.M) {
	if os.Getenv(runc.ShimConfigEnv) != "" {
		os.Exit(runc.ShimMain())
	}
	if (len(os.Args) == 4 || len(os.Args) == 6) && os.Args[1] == serveRuntimeArg {
		mirror := ""
		if len(os.Args) == 6 && os.Args[4] == "--registry-mirror" {
			mirror = os.Args[5]
		}
		os.Exit(serveRuntime(os.Args[2], os.Args[3], mirror))
	}
	code := m.Run()
	if reg.srv != nil {
		reg.srv.Close()
	}
	if reg.dir != "" {
		os.RemoveAll(reg.dir)
	}
	os.Exit(code)
}

// reg is the in-process registry holding podlab/hello:1.0, built once.
var reg struct {
	once  sync.Once
	err   error
	srv   *httptest.Server
	dir   string
	hello string // 127.0.0.1:PORT/podlab/hello:1.0
	host  string // 127.0.0.1:PORT
}

// helloRef builds the hello image and pushes it to an in-process registry
// (never the network), once per test binary.
func helloRef(t testing.TB) string {
	t.Helper()
	reg.once.Do(func() {
		reg.dir, reg.err = os.MkdirTemp("", "podlab-kubelet-test-")
		if reg.err != nil {
			return
		}
		bin := filepath.Join(reg.dir, "hello")
		if reg.err = images.BuildHello(context.Background(), testenv.RepoRoot(), bin); reg.err != nil {
			return
		}
		img, err := images.Hello(context.Background(), images.HelloOptions{Binary: bin})
		if err != nil {
			reg.err = err
			return
		}
		reg.srv = httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		reg.host = strings.TrimPrefix(reg.srv.URL, "http://")
		reg.hello = reg.host + "/" + images.HelloRef
		ref, err := name.ParseReference(reg.hello)
		if err != nil {
			reg.err = err
			return
		}
		reg.err = remote.Write(ref, img)
	})
	if reg.err != nil {
		t.Fatalf("the hello image: %v", reg.err)
	}
	return reg.hello
}

// cluster is an API server in a temporary state directory and node-1's
// kubelet, with short back-offs.
type cluster struct {
	runc    string
	dir     string
	srv     *apiserver.Server
	admin   apiserver.Interface
	node    apiserver.Interface // system:node:node-1
	kubelet *kubelet.Kubelet
	cri     *criremote.Client // the node runtime's, as crictl would reach it
	reports []kubelet.Report
	mu      sync.Mutex
}

type clusterOption func(*kubelet.Config)

func newCluster(t *testing.T, opts ...clusterOption) *cluster {
	t.Helper()
	return newClusterWithRuntime(t, nil, opts...)
}

// newClusterWithRuntime is newCluster with the node's runtime configured
// by rt too (its runc, handlers, CNI plugin directories), as `podlab
// runtime`'s flags would.
func newClusterWithRuntime(t *testing.T, rt func(*cri.Config), opts ...clusterOption) *cluster {
	t.Helper()
	testenv.RequireRoot(t)
	ctx := context.Background()
	c := &cluster{dir: testenv.StateDir(t)}
	if _, err := apiserver.Init(ctx, c.dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	c.srv = srv
	if c.admin, err = srv.ClientAs("admin"); err != nil {
		t.Fatal(err)
	}
	if c.node, err = srv.ClientAs("system:node:" + apiserver.HostNode); err != nil {
		t.Fatal(err)
	}
	rc := cri.Config{Node: statedir.Layout{Dir: c.dir}.Node(apiserver.HostNode), Runtime: testenv.Runc(t), Shim: []string{os.Args[0]}, Insecure: true}
	if rt != nil {
		rt(&rc)
	}
	c.runc = rc.Runtime
	cfg := kubelet.Config{
		StateDir:     c.dir,
		Client:       c.node,
		ImageBackOff: 100 * time.Millisecond, MaxImageBackOff: time.Second,
		CrashBackOff: 200 * time.Millisecond, MaxCrashBackOff: 2 * time.Second,
		Poll:   50 * time.Millisecond,
		Settle: 300 * time.Millisecond,
		OnStage: func(r kubelet.Report) {
			c.mu.Lock()
			c.reports = append(c.reports, r)
			c.mu.Unlock()
		},
	}
	cfg.CRI = noderuntime.ServeConfig(t, rc)
	c.cri = cfg.CRI
	for _, o := range opts {
		o(&cfg)
	}
	if c.kubelet, err = kubelet.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a test left: containers, mounts, cgroups.
		zero := int64(0)
		if l, err := c.admin.List(ctx, "pods", "", apiserver.ListOptions{}); err == nil {
			for _, o := range l.Items {
				c.admin.Delete(ctx, "pods", o.GetNamespace(), o.GetName(), apiserver.DeleteOptions{Force: true, GracePeriodSeconds: &zero})
			}
		}
		if err := c.kubelet.CleanupOrphans(ctx); err != nil {
			t.Errorf("cleaning up the node: %v", err)
		}
		srv.Close()
	})
	return c
}

// serveRuntimeOf serves node's runtime in the state directory dir (steps/cri,
// in-process, on the node's socket) for the rest of the test: the kubelet's
// CRI client of it.
func serveRuntimeOf(t *testing.T, dir, node, runcBin string) *criremote.Client {
	t.Helper()
	return noderuntime.Serve(t, statedir.Layout{Dir: dir}.Node(node), runcBin, []string{os.Args[0]})
}

// helloPod is a pod running the hello image with args, not yet created.
func helloPod(t testing.TB, name string, args ...string) *corev1.Pod {
	grace := int64(5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "web", Image: helloRef(t), Args: args,
			}},
		},
	}
}

// create stores pod through the gate, as admin, and binds it to node-1 as
// the scheduler would.
func (c *cluster) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	obj, err := c.admin.Create(ctx, pod)
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	if err := c.admin.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: obj.GetNamespace()},
		Target: corev1.ObjectReference{Kind: "Node", Name: apiserver.HostNode}}); err != nil {
		t.Fatalf("binding pod %s: %v", pod.Name, err)
	}
	return c.get(t, pod.Name)
}

func (c *cluster) get(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	obj, err := c.admin.Get(context.Background(), "pods", "default", name)
	if err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	return obj.(*corev1.Pod)
}

// sync runs SyncPod on the pod's current version.
func (c *cluster) sync(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	if err := c.kubelet.SyncPod(context.Background(), c.get(t, name)); err != nil {
		t.Fatalf("SyncPod %s: %v", name, err)
	}
	return c.get(t, name)
}

// syncUntil syncs the pod until cond holds, or fails after timeout.
func (c *cluster) syncUntil(t *testing.T, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := c.sync(t, name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: not %s after %s; status:\n%s", name, what, timeout, statusText(p))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func statusText(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s\n", p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "  %s restarts %d id %s: %+v last %+v\n", cs.Name, cs.RestartCount, cs.ContainerID, stateText(cs.State), stateText(cs.LastTerminationState))
	}
	return b.String()
}

func stateText(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %s %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "none"
}

// events lists the reasons and messages of the events about a pod.
func (c *cluster) events(t *testing.T, pod *corev1.Pod) []string {
	t.Helper()
	l, err := c.admin.List(context.Background(), "events", pod.Namespace, apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range l.Items {
		e := o.(*corev1.Event)
		if e.InvolvedObject.UID == pod.UID {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
		}
	}
	return out
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func (c *cluster) kubeletRuntime() string { return c.runc }

// stageReports is what the kubelet reported so far.
func (c *cluster) stageReports() []kubelet.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]kubelet.Report(nil), c.reports...)
}

// inspected is what the runtime says of a container (crictl inspect):
// its status, and the verbose info podlab's runtime adds.
type inspected struct {
	Status *runtimeapi.ContainerStatus
	Info   struct {
		SandboxID   string      `json:"sandboxID"`
		Record      string      `json:"record"`
		Bundle      string      `json:"bundle"`
		Config      string      `json:"config"`
		RuntimeDir  string      `json:"runtimeDir"`
		Pid         int         `json:"pid"`
		ShimPid     int         `json:"shimPid"`
		RuncState   string      `json:"runcState"`
		RuntimeSpec *specs.Spec `json:"runtimeSpec"`
	}
}

// inspect asks the runtime for the container's verbose status (crictl
// inspect ID).
func (c *cluster) inspect(t testing.TB, id string) *inspected {
	t.Helper()
	resp, err := c.cri.Runtime.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	out := &inspected{Status: resp.Status}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &out.Info); err != nil {
		t.Fatalf("ContainerStatus %s: verbose info %q: %v", id, resp.Info["info"], err)
	}
	return out
}

// inspectContainer is inspect of the pod's container name, by the
// containerID its status reports.
func (c *cluster) inspectContainer(t testing.TB, pod *corev1.Pod, name string) *inspected {
	t.Helper()
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name && cs.ContainerID != "" {
			id, err := kubelet.ParseContainerID(cs.ContainerID)
			if err != nil {
				t.Fatalf("pod %s, container %s: %v", pod.Name, name, err)
			}
			return c.inspect(t, id.ID)
		}
	}
	t.Fatalf("pod %s has no container %s in its status:\n%s", pod.Name, name, statusText(pod))
	return nil
}

// sandboxInspected is what the runtime says of a sandbox (crictl inspectp).
type sandboxInspected struct {
	Status *runtimeapi.PodSandboxStatus
	Info   struct {
		Record       string            `json:"record"`
		Namespaces   map[string]string `json:"namespaces"`
		CgroupParent string            `json:"cgroupParent"`
		PodDir       string            `json:"podDir"`
	}
}

// sandboxesOf lists the runtime's sandboxes of the pod, by the label the
// kubelet put on them, with their verbose status.
func (c *cluster) sandboxesOf(t testing.TB, uid types.UID) []*sandboxInspected {
	t.Helper()
	ctx := context.Background()
	l, err := c.cri.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{kubelet.LabelPodUID: string(uid)}}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*sandboxInspected
	for _, sb := range l.Items {
		resp, err := c.cri.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		s := &sandboxInspected{Status: resp.Status}
		if err := json.Unmarshal([]byte(resp.Info["info"]), &s.Info); err != nil {
			t.Fatalf("PodSandboxStatus %s: verbose info: %v", sb.Id, err)
		}
		out = append(out, s)
	}
	return out
}

// sandboxOf is the pod's one sandbox.
func (c *cluster) sandboxOf(t testing.TB, uid types.UID) *sandboxInspected {
	t.Helper()
	sbs := c.sandboxesOf(t, uid)
	if len(sbs) != 1 {
		t.Fatalf("pod %s has %d sandboxes in the runtime, want 1", uid, len(sbs))
	}
	return sbs[0]
}

// containersOf lists the runtime's containers of the pod, by label.
func (c *cluster) containersOf(t testing.TB, uid types.UID) []*runtimeapi.Container {
	t.Helper()
	l, err := c.cri.Runtime.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{kubelet.LabelPodUID: string(uid)}}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Containers
}
