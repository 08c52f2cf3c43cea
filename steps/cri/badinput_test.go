package cri

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// Listen_* : what is at the socket path decides.
func TestListen_BadSocketPaths(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, path string)
		want  error
		says  string
		stale bool
	}{
		{"regular file", func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrNotSocket, "is a regular file of 7 bytes", false},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, ErrNotSocket, "is a directory", false},
		{"stale socket", func(t *testing.T, p string) {
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			ln.Close() // the file stays; nobody answers
		}, nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cri.sock")
			tc.make(t, p)
			before, _ := os.Lstat(p)
			ln, stale, err := Listen(ctx, p)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Listen: %v, want %v saying %q", err, tc.want, tc.says)
				}
				after, err := os.Lstat(p)
				if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
					t.Fatalf("the path changed: %v %v", after, err)
				}
				return
			}
			if err != nil || stale != tc.stale {
				t.Fatalf("Listen: %v stale=%v, want stale=%v", err, stale, tc.stale)
			}
			ln.Close()
		})
	}
	t.Run("a second runtime", func(t *testing.T) {
		n := startNode(t, testenv.StateDir(t))
		_, _, err := Listen(ctx, n.node.CRISocket())
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "podlab "+Version) || !strings.Contains(err.Error(), "pid ") {
			t.Fatalf("Listen on a served socket: %v, want ErrInUse naming podlab %s and its pid", err, Version)
		}
		// and the first still answers
		if _, err := n.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
			t.Fatalf("the first runtime stopped answering: %v", err)
		}
	})
}

// Calls with what the runtime does not have, or cannot read.
func TestServer_BadRequests(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	unknown := "0123456789abcdef"
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("bad")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"status of an unknown sandbox", func() error {
			_, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: unknown})
			return err
		}, codes.NotFound, unknown},
		{"stop of an unknown sandbox", func() error {
			_, err := n.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: unknown})
			return err
		}, codes.NotFound, unknown},
		{"status of an unknown container", func() error {
			_, err := n.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: unknown})
			return err
		}, codes.NotFound, unknown},
		{"start of an unknown container", func() error {
			_, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: unknown})
			return err
		}, codes.NotFound, unknown},
		{"stop of an unknown container", func() error {
			_, err := n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: unknown})
			return err
		}, codes.NotFound, unknown},
		{"exec in an unknown container", func() error {
			_, err := n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: unknown, Cmd: []string{"true"}})
			return err
		}, codes.NotFound, unknown},
		{"CreateContainer before RunPodSandbox", func() error {
			_, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: unknown, Config: helloConfig("podlab/hello:1.0")})
			return err
		}, codes.NotFound, unknown},
		{"an image never pulled", func() error {
			_, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig("podlab/never:1.0")})
			return err
		}, codes.NotFound, "podlab/never:1.0"},
		{"status of an unknown image is empty", func() error {
			st, err := n.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "podlab/never:1.0"}})
			if err == nil && st.Image != nil {
				return errors.New("an image")
			}
			return err
		}, codes.OK, ""},
		{"a sandbox config without metadata", func() error {
			_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Hostname: "x"}})
			return err
		}, codes.InvalidArgument, "metadata"},
		{"a relative cgroup parent", func() error {
			c := podConfig("cg")
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods/../../etc"}
			_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: c})
			return err
		}, codes.InvalidArgument, "cgroup_parent"},
		{"an unknown runtime handler", func() error {
			_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("gv"), RuntimeHandler: "nope"})
			return err
		}, codes.Unknown, `failed to get sandbox runtime: no runtime for "nope" is configured`},
		{"a container config without an image", func() error {
			c := helloConfig("")
			_, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: c})
			return err
		}, codes.InvalidArgument, "names no image"},
		{"a container config without metadata", func() error {
			_, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{}})
			return err
		}, codes.InvalidArgument, "metadata"},
		{"the same sandbox twice", func() error {
			_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("bad")})
			return err
		}, codes.AlreadyExists, sb.PodSandboxId},
		{"remove of an unknown container is done already", func() error {
			_, err := n.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: unknown})
			return err
		}, codes.OK, ""},
		{"remove of an unknown sandbox is done already", func() error {
			_, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: unknown})
			return err
		}, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
	// Nothing was made by the refused calls: one sandbox, no container.
	l, err := n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("sandboxes after the bad calls: %v %v, want the one", l, err)
	}
	ids, _ := n.srv.rec.containerIDs()
	if len(ids) != 0 {
		t.Fatalf("container records after the bad calls: %v", ids)
	}
}

// A sandbox whose CNI ADD fails is undone: its namespaces unpinned, its
// pod directory and record removed; the error says what failed.
func TestServer_RunPodSandbox_NetworkFails(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	noPlugins := t.TempDir()
	n := startNode(t, testenv.StateDir(t), func(c *Config) { c.CNIBinDirs = []string{noPlugins} })
	if _, err := n.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.9.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("nonet")})
	if err == nil || !strings.Contains(err.Error(), "failed to setup network for sandbox") {
		t.Fatalf("RunPodSandbox without the CNI plugins: %v, want the network setup's failure", err)
	}
	for _, dir := range []string{n.node.NamespaceDir("net"), n.node.NamespaceDir("ipc"), n.node.NamespaceDir("uts"), n.node.PodsDir(), n.node.CRISandboxesDir()} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s holds %v after the failed RunPodSandbox", dir, entries)
		}
	}
	if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), n.dir) {
		t.Errorf("a mount under %s is left", n.dir)
	}
}

// A container whose runc create fails (its command is not in the image)
// is undone: no bundle, runc container, shim directory or record.
func TestServer_CreateContainer_RuncFails(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	ref := host + "/podlab/hello:1.0"
	if _, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("nocmd")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := helloConfig(ref)
	cfg.Command = []string{"/no-such-program"}
	_, err = n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "no-such-program") {
		t.Fatalf("CreateContainer of a command the image lacks: %v, want runc's error naming it", err)
	}
	for _, dir := range []string{n.node.PodBundles(sb.PodSandboxId), n.node.RuncRoot(), n.node.ContainersDir(), n.node.CRIContainersDir()} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s holds %v after the failed CreateContainer", dir, entries)
		}
	}
}
