package cri

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/statedir"
)

// specFor builds the spec of cfg over a small rootfs, in a sandbox that
// pinned no namespaces (the node's are joined), the runtime's own
// oom_score_adj being oomFloor.
func specFor(t *testing.T, cfg *runtimeapi.ContainerConfig, oomFloor int) (*specs.Spec, error) {
	t.Helper()
	return specInSandbox(t, cfg, oomFloor, nil)
}

// specInSandbox is specFor in a sandbox whose config linux sets.
func specInSandbox(t *testing.T, cfg *runtimeapi.ContainerConfig, oomFloor int, linux *runtimeapi.LinuxPodSandboxConfig) (*specs.Spec, error) {
	t.Helper()
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(filepath.Join(bundle, "rootfs", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nweb:x:1000:1000::/home/web:/bin/sh\n"
	if err := os.WriteFile(filepath.Join(bundle, "rootfs", "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "rootfs", "etc", "group"), []byte("root:x:0:\nweb:x:1000:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{node: statedir.Node{Name: "node-1", Dir: dir, CgroupRoot: "/podlab-test/nodes/node-1"}}
	sb := &sandboxRecord{ID: "sb0123456789", CgroupParent: "/podlab-test/nodes/node-1/kubepods/podu1",
		config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}, Linux: linux}}
	img := &v1.ConfigFile{OS: "linux", Config: v1.Config{Entrypoint: []string{"/hello"}, Cmd: []string{"--listen", ":8080"}, Env: []string{"PATH=/bin", "GREETING=image"}}}
	return s.containerSpec(context.Background(), "c0123456789", sb, cfg, img, "podlab/hello:1.0", bundle, oomFloor)
}

func baseConfig() *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "hello"}, Image: &runtimeapi.ImageSpec{Image: "podlab/hello:1.0"}}
}

func TestContainerSpec(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(c *runtimeapi.ContainerConfig)
		floor int
		check func(t *testing.T, s *specs.Spec)
	}{
		{"command, args and env over the image's", func(c *runtimeapi.ContainerConfig) {
			c.Args = []string{"--once"}
			c.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("cri")}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			if !slices.Equal(s.Process.Args, []string{"/hello", "--once"}) || !slices.Contains(s.Process.Env, "GREETING=cri") || slices.Contains(s.Process.Env, "GREETING=image") {
				t.Fatalf("args %q env %q", s.Process.Args, s.Process.Env)
			}
		}},
		{"the pod's cgroup and the cri annotations", nil, -1000, func(t *testing.T, s *specs.Spec) {
			if s.Linux.CgroupsPath != "/podlab-test/nodes/node-1/kubepods/podu1/c0123456789" {
				t.Fatalf("cgroupsPath %q", s.Linux.CgroupsPath)
			}
			for k, v := range map[string]string{AnnotationSandboxID: "sb0123456789", AnnotationContainerType: "container",
				AnnotationContainerName: "hello", AnnotationSandboxName: "web", AnnotationImageName: "podlab/hello:1.0"} {
				if s.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, s.Annotations[k], v)
				}
			}
		}},
		{"run as user and group", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 2000}, SupplementalGroups: []int64{3000}}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			u := s.Process.User
			if u.UID != 1000 || u.GID != 2000 || !slices.Contains(u.AdditionalGids, 3000) {
				t.Fatalf("user %+v", u)
			}
		}},
		{"capabilities added and dropped, readonly rootfs, no_new_privs", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Capabilities:   &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"CHOWN"}},
				ReadonlyRootfs: true, NoNewPrivs: true}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			b := s.Process.Capabilities.Bounding
			if !slices.Contains(b, "CAP_NET_ADMIN") || slices.Contains(b, "CAP_CHOWN") || !s.Root.Readonly || !s.Process.NoNewPrivileges {
				t.Fatalf("bounding %v readonly %v nnp %v", b, s.Root.Readonly, s.Process.NoNewPrivileges)
			}
		}},
		{"drop ALL then add one", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_BIND_SERVICE"}, DropCapabilities: []string{"ALL"}}}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			if b := s.Process.Capabilities.Bounding; !slices.Equal(b, []string{"CAP_NET_BIND_SERVICE"}) {
				t.Fatalf("bounding %v", b)
			}
		}},
		{"privileged", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true,
				Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			if !slices.Contains(s.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") || len(s.Linux.MaskedPaths) != 0 || s.Linux.Seccomp != nil {
				t.Fatalf("bounding %v masked %v seccomp %v", s.Process.Capabilities.Bounding, s.Linux.MaskedPaths, s.Linux.Seccomp != nil)
			}
		}},
		{"seccomp RuntimeDefault", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
				t.Fatalf("seccomp %v", s.Linux.Seccomp)
			}
		}},
		{"no seccomp profile is unconfined", nil, -1000, func(t *testing.T, s *specs.Spec) {
			if s.Linux.Seccomp != nil {
				t.Fatal("a seccomp filter with no profile asked")
			}
		}},
		{"resources", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
				CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 500}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			r := s.Linux.Resources
			if *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.CPU.Shares != 512 || *r.Memory.Limit != 64<<20 || *s.Process.OOMScoreAdj != 500 {
				t.Fatalf("resources %+v oom %d", r, *s.Process.OOMScoreAdj)
			}
		}},
		{"oom_score_adj no lower than the runtime's own (restrict_oom_score_adj)", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{OomScoreAdj: -997}}
		}, 0, func(t *testing.T, s *specs.Spec) {
			if *s.Process.OOMScoreAdj != 0 {
				t.Fatalf("oom_score_adj %d, want the runtime's 0", *s.Process.OOMScoreAdj)
			}
		}},
		{"mounts with propagation, devices", func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: os.TempDir(), Readonly: true,
				Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}}
			c.Devices = []*runtimeapi.Device{{HostPath: "/dev/null", ContainerPath: "/dev/xnull", Permissions: "rw"}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/data" })
			if i < 0 || !slices.Contains(s.Mounts[i].Options, "rslave") || !slices.Contains(s.Mounts[i].Options, "ro") {
				t.Fatalf("mounts %+v", s.Mounts)
			}
			if !slices.ContainsFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == "/dev/xnull" }) {
				t.Fatalf("devices %+v", s.Linux.Devices)
			}
		}},
		{"the node's namespaces where the sandbox has none", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}}}
		}, -1000, func(t *testing.T, s *specs.Spec) {
			for _, ns := range s.Linux.Namespaces {
				if ns.Type == specs.NetworkNamespace || ns.Type == specs.PIDNamespace {
					t.Fatalf("namespaces %+v: want the node's network and PID namespaces", s.Linux.Namespaces)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			if tc.set != nil {
				tc.set(cfg)
			}
			s, err := specFor(t, cfg, tc.floor)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

// The sandbox's sysctls go into every container's spec, as containerd
// puts LinuxPodSandboxConfig.sysctls there: runc sets them in the pod's
// namespaces, which the container joins.
func TestContainerSpec_SandboxSysctls(t *testing.T) {
	want := map[string]string{"net.ipv4.ip_unprivileged_port_start": "80", "net.core.somaxconn": "1024"}
	s, err := specInSandbox(t, baseConfig(), -1000, &runtimeapi.LinuxPodSandboxConfig{Sysctls: want})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.Sysctl) != len(want) {
		t.Fatalf("linux.sysctl = %v, want %v", s.Linux.Sysctl, want)
	}
	for k, v := range want {
		if s.Linux.Sysctl[k] != v {
			t.Errorf("linux.sysctl[%s] = %q, want %q", k, s.Linux.Sysctl[k], v)
		}
	}
	s, err = specFor(t, baseConfig(), -1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.Sysctl) != 0 {
		t.Errorf("a sandbox with no sysctls: linux.sysctl = %v", s.Linux.Sysctl)
	}
}

func TestContainerSpec_Refused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *runtimeapi.ContainerConfig)
		says string
	}{
		{"a mount of a host path that does not exist", func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/nonexistent/podlab"}}
		}, "/nonexistent/podlab"},
		{"a relative container path", func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "data", HostPath: os.TempDir()}}
		}, "must be absolute"},
		{"a debug container's target PID namespace", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "abc"}}}
		}, "TARGET"},
		{"a user not in the image", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "nobody-here"}}
		}, "nobody-here"},
		{"a Localhost seccomp profile that is not there", func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/nonexistent/profile.json"}}}
		}, "/nonexistent/profile.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			tc.set(cfg)
			_, err := specFor(t, cfg, -1000)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}
