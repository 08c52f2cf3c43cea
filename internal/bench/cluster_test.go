package bench

// Issue 14's cluster of machines: a Deployment of 50 replicas over 5
// joined nodes that run containers, all Running with a pod IP in < 20 s on
// the 2-core VM, and HTTP from pods on one node to pods on another.
//
// Every part is real and its own process, as a learner runs them
// (bin/podlab): `podlab init`, `podlab apiserver`, the controller-manager
// with node IPAM (--allocate-node-cidrs --cluster-cidr 10.244.0.0/16), the
// scheduler, and per node `podlab node join` (a network namespace of its
// own on the lab bridge), its kubelet (which re-execs itself inside that
// namespace and runs pods with runc, attached through the CNI plugins) and
// its network agent (host-gw routes to the other nodes' pod CIDRs). The
// nodes pull the hello image from a registry on the lab gateway. The clock
// starts at the Deployment's create and stops when every replica is
// Running with status.podIP. Then one pod of each node asks one pod of
// every other node for its page, from inside its network namespace, and
// `podlab reset` must leave nothing of the state directory on the host.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

// flannelProto marks the network agent's routes (steps/netagent).
const flannelProto = 117

// cluster is one run: how many joined nodes, how many replicas, and the
// bound on create -> all Running with an IP.
type cluster struct {
	Nodes    int
	Replicas int32
	Target   time.Duration
}

// clusterResult is what a run measured.
type clusterResult struct {
	Setup    time.Duration  // init to every node Ready with its podCIDR and routes
	Running  time.Duration  // the Deployment's create -> every replica Running with an IP
	ByNode   map[string]int // replicas per node
	Pairs    int            // node pairs sampled
	PairsOK  int            // pairs whose HTTP request was answered 200 by the right pod
	Failures []string       // what the failed pairs said
	Traces   []string       // what reset left on the host
	Phases   string         // where the time went: created, bound, Running, each pod's, from the create
}

// component is a podlab process the run started.
type component struct {
	name string
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{}
}

// stop signals c (SIGINT, as Ctrl-C) and waits for it, killing it after 20 s.
func (c *component) stop(sig syscall.Signal) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// labRun is a state directory and the podlab processes serving it.
type labRun struct {
	tb     testing.TB
	podlab string
	runc   string
	layout statedir.Layout
	comps  []*component
}

func (r *labRun) run(args ...string) string {
	r.tb.Helper()
	cmd := exec.Command(r.podlab, append([]string{"--state-dir", r.layout.Dir}, args...)...)
	cmd.Env = append(os.Environ(), "PODLAB_RUNTIME="+r.runc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.tb.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (r *labRun) start(args ...string) *component {
	r.tb.Helper()
	cmd := exec.Command(r.podlab, append([]string{"--state-dir", r.layout.Dir}, args...)...)
	cmd.Env = append(os.Environ(), "PODLAB_RUNTIME="+r.runc)
	c := &component{name: strings.Join(args, " "), cmd: cmd, out: &testenv.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		r.tb.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	r.comps = append(r.comps, c)
	return c
}

// logs is every component's output, for a failure's message.
func (r *labRun) logs() string {
	var b strings.Builder
	for _, c := range r.comps {
		out := c.out.String()
		if len(out) > 4000 && os.Getenv("PODLAB_BENCH_LOGS") == "" {
			out = "..." + out[len(out)-4000:]
		}
		fmt.Fprintf(&b, "--- podlab %s:\n%s\n", c.name, out)
	}
	return b.String()
}

// freeLoopbackPort is a port nobody listens on now.
func freeLoopbackPort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// pushHello builds the hello image and pushes it to a registry served
// on ln until tb ends; it returns the image's reference.
func pushHello(tb testing.TB, ln net.Listener) string {
	tb.Helper()
	ctx := context.Background()
	bin := filepath.Join(tb.TempDir(), "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), bin); err != nil {
		tb.Fatal(err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: bin})
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	ref := ln.Addr().String() + "/" + images.HelloRef
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		tb.Fatal(err)
	}
	return ref
}

// flannelRoutes counts the network agent's routes in the network
// namespace pinned at path.
func flannelRoutes(path string) (int, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return 0, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: flannelProto}, netlink.RT_FILTER_PROTOCOL)
	return len(rs), err
}

// askOverHTTP sends GET / to ip:8080 from inside the network namespace
// pinned at from, and wants 200 with the target pod's name in the page
// (the hello image answers with its host name, the pod's). Running says
// the container started, not that its app listens yet (that is what a
// readiness probe is for; hello has none): a refused connection is tried
// again until the 10 seconds are up.
func askOverHTTP(ctx context.Context, from, ip, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := up.DialInNetns(ctx, from, "tcp", net.JoinHostPort(ip, "8080"))
	for errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		conn, err = up.DialInNetns(ctx, from, "tcp", net.JoinHostPort(ip, "8080"))
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", ip)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("answered %s: %q, want 200 naming %s", resp.Status, body, want)
	}
	return nil
}

// clusterOfMachines runs the scenario once and returns what it measured.
func clusterOfMachines(tb testing.TB, o cluster) clusterResult {
	tb.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(tb, "root, for network namespaces, runc and the pod sandboxes")
	}
	podlab := filepath.Join(testenv.RepoRoot(), "bin", "podlab")
	if _, err := os.Stat(podlab); err != nil {
		testenv.Missing(tb, "bin/podlab (run make build)")
	}
	r := &labRun{tb: tb, podlab: podlab, runc: testenv.Runc(tb), layout: statedir.Layout{Dir: testenv.StateDir(tb)}}
	l := r.layout
	var nodes []string
	for i := 1; i <= o.Nodes; i++ {
		nodes = append(nodes, "node-"+strconv.Itoa(i))
	}
	var res clusterResult
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	begin := time.Now()
	port := freeLoopbackPort(tb)
	r.run("init", "--apiserver-port", strconv.Itoa(port))
	apiserver := r.start("apiserver", "--secure-port", strconv.Itoa(port))
	cleaned := false
	cleanup := func() {
		if cleaned {
			return
		}
		cleaned = true
		// Every component but the kubelets, then the API server (as
		// kubeadm reset wants it); reset stops the kubelets, which run in
		// their machines, removes the pods' containers, the machines and
		// the lab network.
		for _, c := range r.comps {
			if c != apiserver && !strings.HasPrefix(c.name, "kubelet") {
				c.stop(syscall.SIGINT)
			}
		}
		apiserver.stop(syscall.SIGTERM)
		cmd := exec.Command(podlab, "--state-dir", l.Dir, "reset", "--yes", "--runtime", r.runc)
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Errorf("podlab reset: %v\n%s", err, out)
		}
		for _, c := range r.comps {
			select {
			case <-c.done:
			case <-time.After(20 * time.Second):
				tb.Errorf("podlab %s still runs after reset", c.name)
				c.stop(syscall.SIGKILL)
			}
		}
		res.Traces = testenv.LabTraces(tb, l.Dir, nodes...)
		for _, n := range nodes { // whatever reset missed, so the host stays clean
			machine.Leave(context.Background(), l, n, time.Second)
		}
		if lab, err := machine.LoadLab(l); err == nil {
			machine.Down(context.Background(), lab)
		}
	}
	tb.Cleanup(cleanup)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(apiserver.out.String(), "serving the Kubernetes API on"), nil
	}); err != nil {
		tb.Fatalf("podlab apiserver does not serve:\n%s", r.logs())
	}
	r.start("controller-manager", "--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16")
	r.start("scheduler")
	for _, n := range nodes {
		r.run("node", "join", n)
	}
	lab, err := machine.LoadLab(l)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(lab.Gateway.String(), "0"))
	if err != nil {
		tb.Fatal(err)
	}
	ref := pushHello(tb, ln)
	for _, n := range nodes {
		r.start("kubelet", "--node", n, "--insecure")
		r.start("network-agent", "--node", n)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig("admin"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(ns.Items) != o.Nodes {
			return false, nil
		}
		for _, n := range ns.Items {
			ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if !ready || n.Spec.PodCIDR == "" {
				return false, nil
			}
			if k, err := flannelRoutes(l.Node(n.Name).MachineNetns()); err != nil || k != o.Nodes-1 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		tb.Fatalf("the %d nodes Ready, each with a podCIDR and %d routes to the others': not within 2 minutes\n%s", o.Nodes, o.Nodes-1, r.logs())
	}
	res.Setup = time.Since(begin)

	d := webDeployment(o.Replicas, ref)
	tl := watchTimeline(tb, ctx, cs)
	start := time.Now()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	var pods []corev1.Pod
	running := func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil
		}
		pods = pods[:0]
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				pods = append(pods, p)
			}
		}
		return len(pods) == int(o.Replicas), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, running); err != nil {
		tb.Fatalf("%d of %d replicas Running with an IP after 3 minutes\n%s", len(pods), o.Replicas, r.logs())
	}
	res.Running = time.Since(start)
	res.Phases = tl.phases(start)
	if f := os.Getenv("PODLAB_BENCH_LOGS"); f != "" { // every component's output, to see where the time went
		_ = os.WriteFile(f, []byte(r.logs()), 0o644)
	}

	// One pod per node; each asks one pod of every other node.
	res.ByNode = map[string]int{}
	first := map[string]corev1.Pod{}
	for _, p := range pods {
		res.ByNode[p.Spec.NodeName]++
		if _, ok := first[p.Spec.NodeName]; !ok {
			first[p.Spec.NodeName] = p
		}
	}
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			from, okA := first[a]
			to, okB := first[b]
			if !okA || !okB {
				continue
			}
			res.Pairs++
			netnsFile, err := podNetns(ctx, l.Node(a), from.UID)
			if err == nil {
				err = askOverHTTP(ctx, netnsFile, to.Status.PodIP, to.Name)
			}
			if err != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("%s (%s, %s) -> %s (%s, %s): %v", from.Name, a, from.Status.PodIP, to.Name, b, to.Status.PodIP, err))
				continue
			}
			res.PairsOK++
		}
	}
	cleanup()
	return res
}

// timeline is when a watch on the pods saw each pod created, bound to a
// node and Running with an IP.
type timeline struct {
	mu                      sync.Mutex
	created, bound, running map[string]time.Time
}

func watchTimeline(tb testing.TB, ctx context.Context, cs kubernetes.Interface) *timeline {
	tl := &timeline{created: map[string]time.Time{}, bound: map[string]time.Time{}, running: map[string]time.Time{}}
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			tl.mu.Lock()
			first := func(m map[string]time.Time) {
				if _, ok := m[p.Name]; !ok {
					m[p.Name] = now
				}
			}
			first(tl.created)
			if p.Spec.NodeName != "" {
				first(tl.bound)
			}
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				first(tl.running)
			}
			tl.mu.Unlock()
		}
	}()
	return tl
}

// phases says, for each step, when the first, the median and the last pod
// reached it, from start.
func (tl *timeline) phases(start time.Time) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	for _, ph := range []struct {
		name string
		m    map[string]time.Time
	}{{"created", tl.created}, {"bound", tl.bound}, {"Running", tl.running}} {
		var ds []time.Duration
		for _, t := range ph.m {
			ds = append(ds, t.Sub(start))
		}
		slices.Sort(ds)
		if len(ds) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s first %.1fs median %.1fs last %.1fs; ", ph.name, ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
	}
	return b.String()
}

// BenchmarkClusterOfMachines: issue 14's target, 50 replicas over 5
// joined nodes Running with IPs in < 20 s, and pod-to-pod HTTP across
// every pair of nodes.
func BenchmarkClusterOfMachines(b *testing.B) {
	o := cluster{Nodes: 5, Replicas: 50, Target: 20 * time.Second}
	for range b.N {
		r := clusterOfMachines(b, o)
		ok := r.Running <= o.Target
		if !ok {
			b.Errorf("%d replicas over %d joined nodes Running with an IP in %v, target < %v", o.Replicas, o.Nodes, r.Running.Round(time.Millisecond), o.Target)
		}
		if r.PairsOK != r.Pairs || r.Pairs != o.Nodes*(o.Nodes-1)/2 {
			b.Errorf("pod-to-pod HTTP across nodes: %d of %d node pairs answered (want all %d):\n%s", r.PairsOK, r.Pairs, o.Nodes*(o.Nodes-1)/2, strings.Join(r.Failures, "\n"))
		}
		if len(r.Traces) != 0 {
			b.Errorf("podlab reset left on the host: %v", r.Traces)
		}
		fmt.Printf("%-50s %9.1f s  (init, %d joins, every node Ready with a podCIDR and its routes)\n", "a cluster of machines: setup", r.Setup.Seconds(), o.Nodes)
		fmt.Printf("%-50s %9.1f s  (%.1f pods/s, by node %v; target < %v) %s\n", fmt.Sprintf("a cluster of machines: %d replicas Running with IPs", o.Replicas),
			r.Running.Seconds(), float64(o.Replicas)/r.Running.Seconds(), r.ByNode, o.Target, verdict(ok))
		fmt.Printf("%-50s %s\n", "a cluster of machines: pods", r.Phases)
		fmt.Printf("%-50s %9d of %d node pairs answered\n", "a cluster of machines: pod-to-pod HTTP", r.PairsOK, r.Pairs)
		b.ReportMetric(r.Running.Seconds(), "running-s")
		b.ReportMetric(float64(o.Replicas)/r.Running.Seconds(), "pods/s")
		b.ReportMetric(float64(r.PairsOK), "pairs-ok")
	}
}

// TestClusterOfMachines is the benchmark's scenario in make test, smaller
// (6 replicas over 3 joined nodes) and with a generous bound.
func TestClusterOfMachines(t *testing.T) {
	o := cluster{Nodes: 3, Replicas: 6, Target: 60 * time.Second}
	r := clusterOfMachines(t, o)
	if r.Running > o.Target {
		t.Errorf("%d replicas over %d joined nodes Running with an IP in %v, want within %v", o.Replicas, o.Nodes, r.Running, o.Target)
	}
	if len(r.ByNode) != o.Nodes {
		t.Errorf("replicas by node %v: want some on each of the %d nodes (the scheduler spreads them)", r.ByNode, o.Nodes)
	}
	if want := o.Nodes * (o.Nodes - 1) / 2; r.Pairs != want || r.PairsOK != want {
		t.Errorf("pod-to-pod HTTP across nodes: %d of %d node pairs answered, want all %d:\n%s", r.PairsOK, r.Pairs, want, strings.Join(r.Failures, "\n"))
	}
	if len(r.Traces) != 0 {
		t.Errorf("podlab reset left on the host: %v", r.Traces)
	}
	t.Logf("setup %v; %d replicas Running with IPs in %v (%s); %d of %d node pairs answered over HTTP",
		r.Setup.Round(time.Millisecond), o.Replicas, r.Running.Round(time.Millisecond), r.Phases, r.PairsOK, r.Pairs)
}

// podNetns is the network namespace the node's runtime pinned for the
// pod with uid, as the runtime says over CRI (the kubelet's pod uid label,
// then the verbose PodSandboxStatus, as crictl pods and inspectp).
func podNetns(ctx context.Context, node statedir.Node, uid types.UID) (string, error) {
	c, err := criremote.Dial(kubelet.DefaultRuntimeEndpoint(node), "", criremote.Options{})
	if err != nil {
		return "", err
	}
	defer c.Close()
	l, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{kubelet.LabelPodUID: string(uid)}}})
	if err != nil {
		return "", err
	}
	if len(l.Items) != 1 {
		return "", fmt.Errorf("node %s's runtime has %d sandboxes of pod %s", node.Name, len(l.Items), uid)
	}
	st, err := c.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: l.Items[0].Id, Verbose: true})
	if err != nil {
		return "", err
	}
	var info struct {
		Namespaces map[string]string `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Namespaces["net"] == "" {
		return "", fmt.Errorf("sandbox %s: no network namespace in its verbose status: %v", l.Items[0].Id, err)
	}
	return info.Namespaces["net"], nil
}
