package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/spec"
)

// seccompOption is the seccomp filter the kubelet asks the runtime for, as
// the kubelet's getSeccompProfile chooses it
// (pkg/kubelet/kuberuntime/helpers.go): the container's
// securityContext.seccompProfile, else the pod's (effectiveSecurityContext
// has merged them into p); with neither, Unconfined, or RuntimeDefault when
// the kubelet runs with --seccomp-default (fallbackDefault). A Localhost
// profile is the file localhostProfile names under root, the node's
// seccomp directory (/var/lib/kubelet/seccomp on a real node).
//
// What the kubelet refuses (Localhost without a localhostProfile, a path
// that is absolute or leaves root with "..", an unknown type) is
// ErrSeccompProfile, and the container waits in CreateContainerConfigError.
// The file itself is read by the runtime (spec.WithSeccompLocalhost): a
// missing or invalid one is spec.ErrSeccompProfile, CreateContainerError.
func seccompOption(p *corev1.SeccompProfile, root string, fallbackDefault bool) (oci.SpecOpts, error) {
	if p == nil {
		if fallbackDefault {
			return spec.WithSeccompRuntimeDefault(), nil
		}
		return spec.WithSeccompUnconfined(), nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return spec.WithSeccompRuntimeDefault(), nil
	case corev1.SeccompProfileTypeUnconfined:
		return spec.WithSeccompUnconfined(), nil
	case corev1.SeccompProfileTypeLocalhost:
		path, err := localhostProfilePath(p.LocalhostProfile, root)
		if err != nil {
			return nil, err
		}
		return withRuntimeError("failed to generate seccomp spec opts", spec.WithSeccompLocalhost(path)), nil
	}
	return nil, fmt.Errorf("%w: unknown seccompProfile type %q: use RuntimeDefault, Unconfined or Localhost", ErrSeccompProfile, p.Type)
}

// localhostProfilePath is root/localhostProfile, refusing a path that is
// empty, absolute, or has a ".." element (the API server's validation
// refuses them too; the kubelet does not trust that it ran).
func localhostProfilePath(lp *string, root string) (string, error) {
	if lp == nil || *lp == "" {
		return "", fmt.Errorf("%w: localhostProfile must be set if seccompProfile type is Localhost (a path relative to %s)", ErrSeccompProfile, root)
	}
	rel := *lp
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: localhostProfile %q must be relative to the node's seccomp directory %s", ErrSeccompProfile, rel, root)
	}
	for _, el := range strings.Split(filepath.ToSlash(rel), "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: localhostProfile %q must not contain '..': profiles are files under %s", ErrSeccompProfile, rel, root)
		}
	}
	return filepath.Join(root, rel), nil
}

// withRuntimeError prefixes the errors of opt with what the runtime was
// doing, as containerd's CRI plugin words them.
func withRuntimeError(doing string, opt oci.SpecOpts) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		if err := opt(ctx, cl, c, s); err != nil {
			return fmt.Errorf("%s: %w", doing, err)
		}
		return nil
	}
}
