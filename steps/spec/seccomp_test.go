package spec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// allowsUnconditionally says whether the filter has a rule allowing name
// whatever its arguments.
func allowsUnconditionally(f *specs.LinuxSeccomp, name string) bool {
	for _, r := range f.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 && slices.Contains(r.Names, name) {
			return true
		}
	}
	return false
}

func TestWithSeccomp_EmptySpec(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "audit.json")
	writeFile(t, good, `{"defaultAction": "SCMP_ACT_LOG", "architectures": ["SCMP_ARCH_X86_64"],
		"syscalls": [{"names": ["keyctl"], "action": "SCMP_ACT_ERRNO"}]}`)

	tests := []struct {
		name  string
		opt   oci.SpecOpts
		check func(t *testing.T, f *specs.LinuxSeccomp)
	}{
		{
			name: "RuntimeDefault is containerd's profile",
			opt:  WithSeccompRuntimeDefault(),
			check: func(t *testing.T, f *specs.LinuxSeccomp) {
				if f == nil {
					t.Fatal("no filter")
				}
				if f.DefaultAction != specs.ActErrno {
					t.Errorf("defaultAction %s, want %s", f.DefaultAction, specs.ActErrno)
				}
				if len(f.Architectures) == 0 {
					t.Error("no architectures")
				}
				want := seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
				if len(f.Syscalls) != len(want.Syscalls) {
					t.Errorf("%d rules, containerd's profile without capabilities has %d", len(f.Syscalls), len(want.Syscalls))
				}
				for _, n := range []string{"read", "write", "execve", "openat"} {
					if !allowsUnconditionally(f, n) {
						t.Errorf("%s is not allowed", n)
					}
				}
				for _, n := range []string{"mount", "unshare", "keyctl", "kexec_load", "bpf", "setns"} {
					if allowsUnconditionally(f, n) {
						t.Errorf("%s is allowed", n)
					}
				}
			},
		},
		{
			name: "Unconfined is no filter",
			opt:  WithSeccompUnconfined(),
			check: func(t *testing.T, f *specs.LinuxSeccomp) {
				if f != nil {
					t.Errorf("filter %+v, want none", f)
				}
			},
		},
		{
			name: "Localhost is the file's profile",
			opt:  WithSeccompLocalhost(good),
			check: func(t *testing.T, f *specs.LinuxSeccomp) {
				if f == nil || f.DefaultAction != specs.ActLog || len(f.Syscalls) != 1 || f.Syscalls[0].Names[0] != "keyctl" ||
					!slices.Equal(f.Architectures, []specs.Arch{specs.ArchX86_64}) {
					t.Errorf("filter %+v, want the file's", f)
				}
			},
		},
		{name: "WithSeccomp empty type is no filter", opt: WithSeccomp("", ""), check: func(t *testing.T, f *specs.LinuxSeccomp) {
			if f != nil {
				t.Errorf("filter %+v, want none", f)
			}
		}},
		{name: "WithSeccomp RuntimeDefault", opt: WithSeccomp(SeccompRuntimeDefault, ""), check: func(t *testing.T, f *specs.LinuxSeccomp) {
			if f == nil || f.DefaultAction != specs.ActErrno {
				t.Errorf("filter %+v, want containerd's", f)
			}
		}},
		{name: "WithSeccomp Localhost", opt: WithSeccomp(SeccompLocalhost, good), check: func(t *testing.T, f *specs.LinuxSeccomp) {
			if f == nil || f.DefaultAction != specs.ActLog {
				t.Errorf("filter %+v, want the file's", f)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustApplyEmpty(t, tc.opt)
			var f *specs.LinuxSeccomp
			if s.Linux != nil {
				f = s.Linux.Seccomp
			}
			tc.check(t, f)
		})
	}
}

// The default profile follows the capabilities, as containerd's does: with
// CAP_SYS_ADMIN, mount and unshare are allowed.
func TestWithSeccompRuntimeDefault_FollowsCapabilities(t *testing.T) {
	s := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN"}}}}
	if err := WithSeccompRuntimeDefault()(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"mount", "unshare", "setns"} {
		if !allowsUnconditionally(s.Linux.Seccomp, n) {
			t.Errorf("with CAP_SYS_ADMIN, %s is not allowed", n)
		}
	}
}

func TestWithSeccompUnconfined_RemovesFilter(t *testing.T) {
	s := &specs.Spec{Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}}}
	if err := WithSeccompUnconfined()(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if s.Linux.Seccomp != nil {
		t.Errorf("filter %+v left", s.Linux.Seccomp)
	}
}

func TestWithSeccomp_BadInput(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "not.json")
	writeFile(t, notJSON, "defaultAction: SCMP_ACT_ERRNO\n")
	noDefault := filepath.Join(dir, "nodefault.json")
	writeFile(t, noDefault, `{"syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}`)
	unreadable := filepath.Join(dir, "adir.json")
	if err := os.Mkdir(unreadable, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  oci.SpecOpts
		want error
		text string
	}{
		{name: "missing file", opt: WithSeccompLocalhost(filepath.Join(dir, "nope.json")), want: ErrSeccompProfile, text: "does not exist"},
		{name: "not JSON", opt: WithSeccompLocalhost(notJSON), want: ErrSeccompProfile, text: "not an OCI seccomp profile in JSON"},
		{name: "no defaultAction", opt: WithSeccompLocalhost(noDefault), want: ErrSeccompProfile, text: "no defaultAction"},
		{name: "a directory", opt: WithSeccompLocalhost(unreadable), want: ErrSeccompProfile},
		{name: "unknown type", opt: WithSeccomp("runtime/default", ""), want: ErrInvalidSeccompType, text: "use RuntimeDefault, Unconfined or Localhost"},
		{name: "Localhost without a file", opt: WithSeccomp(SeccompLocalhost, ""), want: ErrInvalidSeccompType, text: "needs a profile file"},
		{name: "a file with RuntimeDefault", opt: WithSeccomp(SeccompRuntimeDefault, notJSON), want: ErrInvalidSeccompType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := applyEmpty(t, tc.opt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q lacks %q", err, tc.text)
			}
			if s.Linux != nil && s.Linux.Seccomp != nil {
				t.Errorf("a filter was set: %+v", s.Linux.Seccomp)
			}
		})
	}
}

func TestExplain_Seccomp(t *testing.T) {
	bundle := testBundle(t, "web")
	s, err := Generate(context.Background(), nginxConfig(), bundle, Options{Seccomp: SeccompRuntimeDefault})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Explain(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		`"Seccomp: 2"`,
		"default action SCMP_ACT_ERRNO (the call fails with EPERM)",
		"architectures  SCMP_ARCH_",
		"NOT allowed (among others)",
		"mount             EPERM  mount file systems",
		"unshare           EPERM  make new namespaces",
		"keyctl            EPERM  use the kernel keyring",
		"kexec_load        EPERM  load a new kernel",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "rules naming") {
		t.Errorf("explanation does not count the rules:\n%s", out)
	}

	s.Linux.Seccomp = nil
	buf.Reset()
	if err := Explain(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"Seccomp: 0"`) {
		t.Errorf("explanation without a filter lacks Seccomp: 0:\n%s", buf.String())
	}
}
