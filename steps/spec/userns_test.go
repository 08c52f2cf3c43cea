package spec

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func podRange(base uint32) []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: 65536}}
}

func TestWithUserNamespace_EmptySpec(t *testing.T) {
	tests := []struct {
		name   string
		nsPath string
	}{
		{"new namespace", ""},
		{"the pod's pinned namespace", "/var/lib/podlab/nodes/node-1/userns/uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustApplyEmpty(t, WithUserNamespace(tt.nsPath, podRange(65536), podRange(131072)))
			if len(s.Linux.Namespaces) != 1 || s.Linux.Namespaces[0] != (specs.LinuxNamespace{Type: specs.UserNamespace, Path: tt.nsPath}) {
				t.Errorf("namespaces = %+v, want one user namespace at %q", s.Linux.Namespaces, tt.nsPath)
			}
			if len(s.Linux.UIDMappings) != 1 || s.Linux.UIDMappings[0].HostID != 65536 || s.Linux.UIDMappings[0].Size != 65536 {
				t.Errorf("uidMappings = %+v", s.Linux.UIDMappings)
			}
			if len(s.Linux.GIDMappings) != 1 || s.Linux.GIDMappings[0].HostID != 131072 {
				t.Errorf("gidMappings = %+v", s.Linux.GIDMappings)
			}
		})
	}
}

func TestWithUserNamespace_ReplacesUserNamespace(t *testing.T) {
	s := mustApplyEmpty(t, WithUserNamespace("", podRange(65536), podRange(65536)))
	if err := WithUserNamespace("/pinned", podRange(196608), podRange(196608))(t.Context(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.Namespaces) != 1 || s.Linux.Namespaces[0].Path != "/pinned" || s.Linux.UIDMappings[0].HostID != 196608 {
		t.Errorf("linux = %+v, want only the second user namespace", s.Linux)
	}
}

func TestWithUserNamespace_BadInput(t *testing.T) {
	tests := []struct {
		name       string
		nsPath     string
		uids, gids []specs.LinuxIDMapping
	}{
		{"no uid mapping", "", nil, podRange(65536)},
		{"no gid mapping", "", podRange(65536), nil},
		{"length 0", "", []specs.LinuxIDMapping{{HostID: 65536}}, podRange(65536)},
		{"past 32 bits", "", []specs.LinuxIDMapping{{HostID: 4294901760, Size: 65536}}, podRange(65536)},
		{"relative path", "userns/uid", podRange(65536), podRange(65536)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := applyEmpty(t, WithUserNamespace(tt.nsPath, tt.uids, tt.gids))
			if !errors.Is(err, ErrInvalidIDMapping) {
				t.Fatalf("error %v, want ErrInvalidIDMapping", err)
			}
			if s.Linux != nil {
				t.Errorf("the spec changed on an error: %+v", s.Linux)
			}
		})
	}
}

func TestWithIDMappedMounts(t *testing.T) {
	s := &specs.Spec{Mounts: []specs.Mount{
		{Destination: "/etc/hosts", Type: "bind", Source: "/pod/etc-hosts", Options: []string{"rbind", "rw"}},
		{Destination: "/data", Type: "bind", Source: "/pod/volumes/data", Options: []string{"rbind", "rw"}},
		{Destination: "/proc", Type: "proc", Source: "proc"},
	}}
	if err := WithUserNamespace("", podRange(65536), podRange(65536))(t.Context(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if err := WithIDMappedMounts("/etc/hosts", "/proc")(t.Context(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	hosts, data, proc := s.Mounts[0], s.Mounts[1], s.Mounts[2]
	if !strings.Contains(strings.Join(hosts.Options, ","), "idmap") || len(hosts.UIDMappings) != 1 || hosts.UIDMappings[0].HostID != 65536 || len(hosts.GIDMappings) != 1 {
		t.Errorf("/etc/hosts = %+v, want idmapped with the container's mappings", hosts)
	}
	if strings.Contains(strings.Join(data.Options, ","), "idmap") || data.UIDMappings != nil {
		t.Errorf("/data = %+v, want it untouched (not named)", data)
	}
	if proc.UIDMappings != nil || len(proc.Options) != 0 {
		t.Errorf("/proc = %+v, want it untouched (not a bind mount)", proc)
	}
	// Twice is once.
	if err := WithIDMappedMounts("/etc/hosts")(t.Context(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(s.Mounts[0].Options, ","), "idmap"); n != 1 {
		t.Errorf("options %v: idmap %d times", s.Mounts[0].Options, n)
	}
}

func TestWithIDMappedMounts_NoUserNamespace(t *testing.T) {
	if _, err := applyEmpty(t, WithIDMappedMounts("/etc/hosts")); !errors.Is(err, ErrInvalidIDMapping) {
		t.Fatalf("error %v, want ErrInvalidIDMapping", err)
	}
}

func TestExplain_UserNamespace(t *testing.T) {
	s := &specs.Spec{Process: &specs.Process{Args: []string{"/hello"}, Cwd: "/"}}
	if err := WithUserNamespace("/nodes/node-1/userns/uid", podRange(131072), podRange(131072))(t.Context(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Explain(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"user    joins /nodes/node-1/userns/uid",
		"uids 0-65535 in the container are host uids 131072-196607",
		"gids 0-65535 in the container are host gids 131072-196607",
		"uid 0 in the user namespace is host uid 131072",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "is the host's root") || strings.Contains(out, "no user namespace") {
		t.Errorf("explain calls a user-namespaced root the host's root:\n%s", out)
	}
}
