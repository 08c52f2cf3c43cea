package kubelet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// serveRuntimeArg makes the test binary node-1's runtime (steps/cri) in
// the state directory that follows, with the runc that follows (and
// --registry-mirror URL, optionally): what `podlab runtime --node node-1`
// is to the podlab binary.
const serveRuntimeArg = "serve-runtime-for-test"

func serveRuntime(dir, runcBin, mirror string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := statedir.New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n := l.Node("node-1")
	ln, _, err := cri.Listen(ctx, n.CRISocket())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, _, err := cri.New(ctx, cri.Config{Node: n, Runtime: runcBin, Shim: []string{os.Args[0]}, Mirror: mirror})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runtimeNode(t *testing.T) statedir.Node {
	t.Helper()
	l, err := statedir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l.Node("node-1")
}

func startCommand(t *testing.T, n statedir.Node) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, serveRuntimeArg, n.State().Dir, testenv.Runc(t)}
}

func TestConnectRuntime_StartsTheNodesRuntime(t *testing.T) {
	n := runtimeNode(t)
	t.Cleanup(func() { criremote.Stop(context.Background(), n.RuntimePidFile(), 5*time.Second) })
	ctx := context.Background()
	var log strings.Builder
	rc := kubelet.RuntimeConnection{Node: n, Start: startCommand(t, n), Log: &log}
	got, err := kubelet.ConnectRuntime(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Client.Close()
	if got.Started == nil || got.Started.Pid == 0 {
		t.Fatalf("nothing answered on the node's own socket, and no runtime was started: %+v", got)
	}
	if got.Client.RuntimeEndpoint != "unix://"+n.CRISocket() || got.Client.ImageEndpoint != got.Client.RuntimeEndpoint {
		t.Errorf("endpoints %s, %s; want the node's socket for both", got.Client.RuntimeEndpoint, got.Client.ImageEndpoint)
	}
	if _, err := got.Client.Image.ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
		t.Fatalf("ListImages through the started runtime: %v", err)
	}
	if !strings.Contains(log.String(), "CRI ListImages request: {}") {
		t.Errorf("the call is not narrated:\n%s", log.String())
	}

	// Connected again (a kubelet restarted): the runtime answers, none is started.
	again, err := kubelet.ConnectRuntime(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	again.Client.Close()
	if again.Started != nil || !strings.HasPrefix(again.Version, "podlab ") {
		t.Errorf("second connect: started %+v, version %q; want none started, podlab's runtime", again.Started, again.Version)
	}
}

// TestConnectRuntime_RestartsOnAnotherMirror: a runtime left running with
// one registry mirror (by an earlier podlab up, whose in-process registry
// is gone) is stopped and started again when the kubelet's start command
// names another, since every pull goes through the runtime; the same
// mirror, or none asked for, keeps it.
func TestConnectRuntime_RestartsOnAnotherMirror(t *testing.T) {
	n := runtimeNode(t)
	t.Cleanup(func() { criremote.Stop(context.Background(), n.RuntimePidFile(), 5*time.Second) })
	ctx := context.Background()
	connect := func(mirror string) *kubelet.RuntimeConnected {
		t.Helper()
		start := startCommand(t, n)
		if mirror != "" {
			start = append(start, "--registry-mirror", mirror)
		}
		got, err := kubelet.ConnectRuntime(ctx, kubelet.RuntimeConnection{Node: n, Start: start, Mirror: mirror})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { got.Client.Close() })
		return got
	}
	mirrorOf := func(c *criremote.Client) string {
		t.Helper()
		st, err := c.Runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			RegistryMirror string `json:"registryMirror"`
		}
		if err := json.Unmarshal([]byte(st.Info["config"]), &cfg); err != nil {
			t.Fatalf("Status verbose info %q: %v", st.Info, err)
		}
		return cfg.RegistryMirror
	}
	const first, second = "http://127.0.0.1:1", "http://127.0.0.1:2"

	one := connect(first)
	if one.Started == nil || one.Restarted != "" || mirrorOf(one.Client) != first {
		t.Fatalf("first connect: started %+v, restarted %q, want a runtime started with mirror %s", one.Started, one.Restarted, first)
	}
	two := connect(second)
	if two.Started == nil || two.Started.Pid == one.Started.Pid || !strings.Contains(two.Restarted, first) {
		t.Fatalf("another mirror: started %+v, restarted %q; want the runtime of mirror %s stopped and a new one started", two.Started, two.Restarted, first)
	}
	if syscall.Kill(one.Started.Pid, 0) == nil {
		t.Errorf("the runtime of mirror %s (pid %d) still runs", first, one.Started.Pid)
	}
	if got := mirrorOf(two.Client); got != second {
		t.Errorf("the runtime now pulls through %q, want %s", got, second)
	}
	for _, mirror := range []string{second, ""} {
		if again := connect(mirror); again.Started != nil || again.Restarted != "" {
			t.Errorf("connect with mirror %q: started %+v, restarted %q; want the running runtime kept", mirror, again.Started, again.Restarted)
		}
	}
}

func TestConnectRuntime_BadInput(t *testing.T) {
	n := runtimeNode(t)
	other := "unix://" + n.State().Containerd().Socket()
	for _, tc := range []struct {
		name string
		rc   kubelet.RuntimeConnection
		is   error
		want []string
	}{
		{"another endpoint nothing answers on", kubelet.RuntimeConnection{RuntimeEndpoint: other},
			kubelet.ErrNoRuntime, []string{"--container-runtime-endpoint " + other, "podlab runtime --node node-1", "podlab containerd"}},
		{"an image endpoint nothing answers on", kubelet.RuntimeConnection{ImageEndpoint: other},
			kubelet.ErrNoRuntime, []string{"--image-service-endpoint " + other}},
		{"the node's socket with no way to start its runtime", kubelet.RuntimeConnection{},
			kubelet.ErrNoRuntime, []string{"podlab runtime --node node-1"}},
		{"not a unix endpoint", kubelet.RuntimeConnection{RuntimeEndpoint: "tcp://127.0.0.1:1"},
			criremote.ErrEndpoint, []string{`scheme "tcp"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rc.Node = n
			if tc.rc.ImageEndpoint != "" {
				// The runtime endpoint answers; the image endpoint does not.
				tc.rc.Start = startCommand(t, n)
				t.Cleanup(func() { criremote.Stop(context.Background(), n.RuntimePidFile(), 5*time.Second) })
			}
			_, err := kubelet.ConnectRuntime(context.Background(), tc.rc)
			if !errors.Is(err, tc.is) {
				t.Fatalf("ConnectRuntime = %v; want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if tc.rc.Start == nil {
				if _, err := os.Stat(n.RuntimePidFile()); !os.IsNotExist(err) {
					t.Errorf("a runtime was started for a refused connection: %v", err)
				}
			}
		})
	}
}

// The node's status comes from its runtime over CRI: with nothing
// answering on the kubelet's endpoint, the Node registers NotReady, saying
// the runtime is down, with no runtime version; a kubelet with no runtime
// client at all is refused.
func TestKubelet_NodeStatus_RuntimeDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := apiserver.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	node, err := srv.ClientAs("system:node:node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubelet.New(kubelet.Config{StateDir: dir, Client: node}); !errors.Is(err, kubelet.ErrNoRuntime) {
		t.Fatalf("New with no CRI client: %v, want ErrNoRuntime", err)
	}
	l, err := statedir.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Dial connects on the first call: nothing answers on the node's socket.
	c, err := criremote.Dial(kubelet.DefaultRuntimeEndpoint(l.Node("node-1")), "", criremote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, err := kubelet.New(kubelet.Config{StateDir: dir, Client: node, CRI: c})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ready *corev1.NodeCondition
	for i, cd := range res.Node.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			ready = &res.Node.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != "KubeletNotReady" || !strings.HasPrefix(ready.Message, "container runtime is down: ") {
		t.Errorf("Ready condition with no runtime: %+v; want False, KubeletNotReady, container runtime is down", ready)
	}
	if v := res.Node.Status.NodeInfo.ContainerRuntimeVersion; v != "" {
		t.Errorf("containerRuntimeVersion %q with no runtime answering; want none", v)
	}
}
