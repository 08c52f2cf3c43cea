package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Seccomp profile types, as a PodSpec's securityContext.seccompProfile.type
// names them (and CRI's SecurityProfile passes them to the runtime).
const (
	// SeccompUnconfined is no filter: every system call the capabilities
	// allow is open. Kubernetes' default, unless the kubelet runs with
	// --seccomp-default.
	SeccompUnconfined = "Unconfined"

	// SeccompRuntimeDefault is the runtime's own filter: containerd's
	// default profile (the same list as Docker's), an allow-list of about
	// 400 system calls; every other call fails with EPERM.
	SeccompRuntimeDefault = "RuntimeDefault"

	// SeccompLocalhost is a profile the node's administrator put in a file
	// on the node.
	SeccompLocalhost = "Localhost"
)

// WithSeccompRuntimeDefault sets linux.seccomp to containerd's default
// profile (github.com/containerd/containerd/v2/contrib/seccomp). The profile
// depends on the capabilities: with CAP_SYS_ADMIN in the bounding set it
// allows mount, unshare, setns and the like, so this option must come after
// every option that changes process.capabilities.
func WithSeccompRuntimeDefault() oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		setLinux(s)
		if s.Process != nil && s.Process.Capabilities != nil {
			s.Linux.Seccomp = seccomp.DefaultProfile(s)
			return nil
		}
		// DefaultProfile reads process.capabilities: no capabilities at all
		// is the strictest case.
		s.Linux.Seccomp = seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
		return nil
	}
}

// WithSeccompUnconfined removes any seccomp filter: runc installs none, and
// /proc/PID/status shows "Seccomp: 0".
func WithSeccompUnconfined() oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux != nil {
			s.Linux.Seccomp = nil
		}
		return nil
	}
}

// WithSeccompLocalhost sets linux.seccomp to the profile in the file at path,
// an OCI runtime spec LinuxSeccomp in JSON (what containerd's
// seccomp.LoadProfile reads for a CRI Localhost profile): at least a
// defaultAction, usually architectures and syscalls. A file that is missing,
// unreadable, not JSON or without a defaultAction is ErrSeccompProfile.
func WithSeccompLocalhost(path string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		p, err := LoadSeccompProfile(path)
		if err != nil {
			return err
		}
		setLinux(s)
		s.Linux.Seccomp = p
		return nil
	}
}

// LoadSeccompProfile reads a seccomp profile file (see WithSeccompLocalhost).
func LoadSeccompProfile(path string) (*specs.LinuxSeccomp, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q: the file does not exist (put the profile there, or use seccompProfile type RuntimeDefault)", ErrSeccompProfile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrSeccompProfile, path, err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w %q: not an OCI seccomp profile in JSON: %v", ErrSeccompProfile, path, err)
	}
	if p.DefaultAction == "" {
		return nil, fmt.Errorf("%w %q: no defaultAction (e.g. \"defaultAction\": \"SCMP_ACT_ERRNO\" with the allowed calls under \"syscalls\")", ErrSeccompProfile, path)
	}
	return &p, nil
}

// WithSeccomp chooses among the three options by a profile type (see
// Options.Seccomp): "" and Unconfined are no filter, RuntimeDefault is
// containerd's profile, Localhost the file at path.
func WithSeccomp(typ, path string) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		if typ != SeccompLocalhost && path != "" {
			return fmt.Errorf("%w: a profile file %q goes with type %s only, not %q", ErrInvalidSeccompType, path, SeccompLocalhost, typ)
		}
		switch typ {
		case "", SeccompUnconfined:
			return WithSeccompUnconfined()(ctx, cl, c, s)
		case SeccompRuntimeDefault:
			return WithSeccompRuntimeDefault()(ctx, cl, c, s)
		case SeccompLocalhost:
			if path == "" {
				return fmt.Errorf("%w: type %s needs a profile file", ErrInvalidSeccompType, SeccompLocalhost)
			}
			return WithSeccompLocalhost(path)(ctx, cl, c, s)
		}
		return fmt.Errorf("%w %q: use %s, %s or %s", ErrInvalidSeccompType, typ, SeccompRuntimeDefault, SeccompUnconfined, SeccompLocalhost)
	}
}

// seccompVerdict is what a filter does with one system call, ignoring
// conditions on its arguments beyond saying that there are some.
func seccompVerdict(f *specs.LinuxSeccomp, name string) (action specs.LinuxSeccompAction, conditional bool, errno uint) {
	action = f.DefaultAction
	if f.DefaultErrnoRet != nil {
		errno = *f.DefaultErrnoRet
	}
	found := false
	for _, r := range f.Syscalls {
		if !slices.Contains(r.Names, name) {
			continue
		}
		if len(r.Args) == 0 {
			e := uint(0)
			if r.ErrnoRet != nil {
				e = *r.ErrnoRet
			}
			return r.Action, false, e
		}
		if !found && r.Action == specs.ActAllow {
			found, action, conditional = true, r.Action, true
		}
	}
	return action, conditional, errno
}
