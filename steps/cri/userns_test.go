package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/spec"
)

// usernsPodConfig is a sandbox config with its own user namespace of
// 65536 ids from host id base, as the kubelet sends it for hostUsers: false.
func usernsPodConfig(name string, base uint32) *runtimeapi.PodSandboxConfig {
	pc := podConfig(name)
	m := []*runtimeapi.IDMapping{{HostId: base, ContainerId: 0, Length: 65536}}
	pc.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: &runtimeapi.UserNamespace{
			Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}}}}
	return pc
}

// A sandbox with userns_options POD pins a user namespace with the
// kubelet's mappings, and its network, IPC and UTS namespaces inside it;
// its container runs in it (uid_map from the kubelet's range), its rootfs
// owned by the range's root; removing the sandbox leaves no mount.
func TestServer_RunPodSandbox_UserNamespace(t *testing.T) {
	ctx := context.Background()
	host := labRegistry(t)
	dir := testenv.StateDir(t)
	// t.TempDir makes 0700 directories; the pod's root must search them,
	// as it can /var/lib/podlab.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, dir)
	defer n.cleanupSandboxes(t)
	// A slot far above what the kubelet's allocator hands out first, so
	// that tests running beside this one on the machine do not meet it.
	base := uint32(65536 * (40000 + os.Getpid()%20000))
	pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/podlab/hello:1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	pc := usernsPodConfig("uns", base)
	pc.LogDirectory = t.TempDir()
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
	if err != nil {
		t.Fatal(err)
	}
	userns := n.node.NamespaceFile("user", sb.PodSandboxId)
	if !isNamespaceMount(userns) {
		t.Fatalf("no user namespace pinned at %s", userns)
	}
	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig(pulled.ImageRef), SandboxConfig: pc})
	if err != nil {
		t.Fatal(err)
	}
	bundle := n.node.CRIBundle(sb.PodSandboxId, cr.ContainerId)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(bundle, spec.RootfsDir, "hello"), &st); err != nil || st.Uid != base {
		t.Fatalf("the rootfs's /hello: uid %d (%v), want the range's root, host uid %d", st.Uid, err, base)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	rs, err := n.srv.rt.State(ctx, cr.ContainerId)
	if err != nil || rs.Pid == 0 {
		t.Fatalf("runc state: %+v %v", rs, err)
	}
	uidMap, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", rs.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(uidMap)); len(f) != 3 || f[0] != "0" || f[1] != fmt.Sprint(base) || f[2] != "65536" {
		t.Fatalf("the container's uid_map is %q, want 0 %d 65536", uidMap, base)
	}
	want, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", rs.Pid))
	var pinned, in syscall.Stat_t
	if syscall.Stat(userns, &pinned) != nil || syscall.Stat(fmt.Sprintf("/proc/%d/ns/user", rs.Pid), &in) != nil || pinned.Ino != in.Ino {
		t.Fatalf("the container's user namespace %s is not the sandbox's pinned one", want)
	}
	waitFor(t, 10*time.Second, "the greeting in the CRI log", func() bool {
		b, _ := os.ReadFile(filepath.Join(pc.LogDirectory, "hello/0.log"))
		return strings.Contains(string(b), "Hello over CRI")
	})
	if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{userns, n.node.NamespaceFile("net", sb.PodSandboxId), bundle} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after RemovePodSandbox", p)
		}
	}
}

// userns_options the runtime cannot make are refused before anything is.
func TestServer_RunPodSandbox_BadUserNamespace(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	m := func(host, ctr, length uint32) []*runtimeapi.IDMapping {
		return []*runtimeapi.IDMapping{{HostId: host, ContainerId: ctr, Length: length}}
	}
	for _, tc := range []struct {
		name string
		set  func(o *runtimeapi.NamespaceOption)
		want string
	}{
		{"TARGET mode", func(o *runtimeapi.NamespaceOption) { o.UsernsOptions.Mode = runtimeapi.NamespaceMode_TARGET }, "POD (its own) or NODE"},
		{"two uid mappings", func(o *runtimeapi.NamespaceOption) {
			o.UsernsOptions.Uids = append(m(65536, 0, 1000), m(131072, 1000, 1000)...)
		}, "want one uid and one gid mapping"},
		{"root unmapped", func(o *runtimeapi.NamespaceOption) {
			o.UsernsOptions.Uids, o.UsernsOptions.Gids = m(65536, 1, 65535), m(65536, 1, 65535)
		}, "uid and gid 0 must be mapped"},
		{"the host's root in the range", func(o *runtimeapi.NamespaceOption) {
			o.UsernsOptions.Uids, o.UsernsOptions.Gids = m(0, 0, 65536), m(0, 0, 65536)
		}, "above the host's root"},
		{"uids and gids differ", func(o *runtimeapi.NamespaceOption) { o.UsernsOptions.Gids = m(131072, 0, 65536) }, "differ"},
		{"with the host's network", func(o *runtimeapi.NamespaceOption) { o.Network = runtimeapi.NamespaceMode_NODE }, "hostNetwork"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := usernsPodConfig("bad", 65536*7)
			tc.set(pc.Linux.SecurityContext.NamespaceOptions)
			_, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunPodSandbox: %v, want InvalidArgument saying %q", err, tc.want)
			}
			if ids, _ := n.srv.rec.sandboxIDs(); len(ids) != 0 {
				t.Fatalf("records %v were made", ids)
			}
		})
	}
}
