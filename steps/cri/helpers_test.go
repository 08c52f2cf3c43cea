package cri

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/internal/testenv/demoregistry"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

func TestMain(m *testing.M) {
	if os.Getenv(runc.ShimConfigEnv) != "" {
		os.Exit(runc.ShimMain())
	}
	os.Exit(m.Run())
}

// labRegistry is an in-process registry (ggcr's) holding the demo images:
// it answers host/podlab/hello:1.0 and host/library/nginx:latest.
func labRegistry(t testing.TB) string { return demoregistry.Serve(t) }

// node is a runtime serving on its socket, and CRI clients of it over
// the socket.
type node struct {
	dir    string
	node   statedir.Node
	srv    *Server
	conn   *grpc.ClientConn
	rt     runtimeapi.RuntimeServiceClient
	img    runtimeapi.ImageServiceClient
	stop   func()
	served chan error
}

func testConfig(t testing.TB, dir string) Config {
	l, err := statedir.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Node: l.Node("node-1"), Runtime: testenv.Runc(t), Shim: []string{exe}, Insecure: true}
}

// startNode serves node-1's runtime of the state directory dir; opts
// change its config.
func startNode(t testing.TB, dir string, opts ...func(*Config)) *node {
	t.Helper()
	cfg := testConfig(t, dir)
	for _, o := range opts {
		o(&cfg)
	}
	if testing.Verbose() {
		cfg.Log = testWriter{t}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, _, err := Listen(ctx, cfg.Node.CRISocket())
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{dir: dir, node: cfg.Node, srv: srv, served: make(chan error, 1)}
	go func() { n.served <- srv.Serve(ctx, ln) }()
	conn, err := grpc.NewClient("unix://"+cfg.Node.CRISocket(), grpcInsecure())
	if err != nil {
		t.Fatal(err)
	}
	n.conn, n.rt, n.img = conn, runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		select {
		case <-n.served:
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop")
		}
	}
	t.Cleanup(n.stop)
	return n
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Hostname: name,
	}
}

func helloConfig(image string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "hello"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Envs:     []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("Hello over CRI")}},
		LogPath:  "hello/0.log",
	}
}

// cleanupSandboxes removes every sandbox the server has, as the kubelet
// would, so the test leaves no container running.
func (n *node) cleanupSandboxes(t testing.TB) {
	ctx := context.Background()
	list, err := n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, sb := range list.Items {
		if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Errorf("removing sandbox %s: %v", sb.Id, err)
		}
	}
}
