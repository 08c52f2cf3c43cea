package cri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// A sandbox made with runtime_handler runsc runs its container with
// gVisor: the handler is in the sandbox's status, the container's state is
// under runsc's own --root, and stop and remove reach it there.
func TestServer_RunPodSandbox_Runsc(t *testing.T) {
	runsc := testenv.LookPath(t, "runsc")
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t), func(c *Config) {
		c.Handlers = runc.MergeHandlers(runc.DefaultHandlers(c.Runtime), []runc.Handler{{Name: "runsc", Binary: runsc,
			Args: []string{"--network=host"}, State: "<id>_sandbox:<id>.state", Package: "runsc"}})
	})
	defer n.cleanupSandboxes(t)
	pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/podlab/hello:1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	pc := podConfig("gv")
	pc.LogDirectory = logDir
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc, RuntimeHandler: "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil || ps.Status.RuntimeHandler != "runsc" {
		t.Fatalf("PodSandboxStatus: %v %v, want runtime_handler runsc", ps, err)
	}
	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig(pulled.ImageRef), SandboxConfig: pc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if cs := containerStatus(t, n, cr.ContainerId); cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after StartContainer: %s (%s %s), want CONTAINER_RUNNING", cs.State, cs.Reason, cs.Message)
	}
	root := n.node.Runtime().HandlerRoot("runsc")
	if root == n.node.Runtime().RuncRoot() {
		t.Fatalf("runsc's root is runc's, %s", root)
	}
	if st, err := os.ReadDir(root); err != nil || len(st) == 0 {
		t.Fatalf("runsc's --root %s holds nothing (%v): the container was not made by runsc", root, err)
	}
	if rs, err := n.srv.runtimes["runsc"].State(ctx, cr.ContainerId); err != nil || rs.Pid == 0 {
		t.Fatalf("runsc state of %s: %+v %v", cr.ContainerId, rs, err)
	}
	waitFor(t, 20*time.Second, "the greeting in the CRI log", func() bool {
		b, _ := os.ReadFile(filepath.Join(logDir, "hello/0.log"))
		return strings.Contains(string(b), "Hello over CRI")
	})
	if _, err := n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cr.ContainerId, Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	if cs := containerStatus(t, n, cr.ContainerId); cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("after StopContainer: %s, want CONTAINER_EXITED", cs.State)
	}
	if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, cr.ContainerId+"_sandbox:"+cr.ContainerId+".state")); err == nil {
		t.Errorf("runsc's state of %s is left after RemovePodSandbox", cr.ContainerId)
	}
}

// crun's handler gets config.json's ociVersion it accepts; on a host with
// hybrid cgroups (v1 controllers and a cgroup2 mount with controllers)
// RunPodSandbox refuses it before anything is made, saying why.
func TestServer_RunPodSandbox_Crun(t *testing.T) {
	testenv.LookPath(t, "crun")
	ctx := context.Background()
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	if h := n.srv.handler("crun"); h.SpecVersion != "1.0.0" {
		t.Fatalf("the crun handler's spec version is %q, want 1.0.0", h.SpecVersion)
	}
	mode, err := runc.CgroupModeAt(runc.CgroupMountRoot)
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("c"), RuntimeHandler: "crun"})
	if mode != runc.CgroupHybridWithControllers {
		if err != nil {
			t.Fatalf("RunPodSandbox with crun on a %s host: %v", mode, err)
		}
		return
	}
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "refuses hosts with hybrid cgroups") {
		t.Fatalf("RunPodSandbox with crun on a hybrid host: %v, want code Unknown and why", err)
	}
	if l, err := n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("after the refusal: %v %v, want no sandbox", l, err)
	}
	if ids, _ := n.srv.rec.sandboxIDs(); len(ids) != 0 {
		t.Fatalf("after the refusal, records %v are left", ids)
	}
}

// The spec of a container in a crun sandbox says ociVersion 1.0.0 (crun
// 1.8.1 refuses 1.2.0 and 1.3.0); runc's says the version podlab writes.
func TestServer_ContainerSpec_HandlerVersion(t *testing.T) {
	n := startNode(t, testenv.StateDir(t))
	img := &v1.ConfigFile{OS: "linux", Config: v1.Config{Entrypoint: []string{"/hello"}}}
	for _, tc := range []struct{ handler, want string }{
		{"crun", "1.0.0"},
		{"runc", ""},
	} {
		t.Run(tc.handler, func(t *testing.T) {
			sb := &sandboxRecord{ID: "sb-" + tc.handler, RuntimeHandler: tc.handler, CgroupParent: "/kubepods", config: podConfig("v")}
			bundle := t.TempDir()
			if err := os.Mkdir(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			sp, err := n.srv.containerSpec(context.Background(), "c-"+tc.handler, sb, helloConfig("x"), img, "x", bundle, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = specs.Version
			}
			if sp.Version != want {
				t.Fatalf("ociVersion %q, want %q", sp.Version, want)
			}
		})
	}
}

// A sandbox made with no runtime_handler reports none, as containerd does
// (crictl pods shows "(default)"), and runs with runc's runtime.
func TestServer_RunPodSandbox_DefaultHandler(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("d")})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil || ps.Status.RuntimeHandler != "" {
		t.Fatalf("PodSandboxStatus: %v %v, want runtime_handler empty", ps, err)
	}
	l, err := n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(l.Items) != 1 || l.Items[0].RuntimeHandler != "" {
		t.Fatalf("ListPodSandbox: %v %v, want one sandbox with runtime_handler empty", l, err)
	}
	if rt := n.srv.rtOf(&containerRecord{SandboxID: sb.PodSandboxId}); rt != n.srv.runtimes[runc.DefaultHandler] {
		t.Fatalf("a container of the default sandbox gets %+v, want runc's runtime", rt)
	}
}
