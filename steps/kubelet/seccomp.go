package kubelet

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The seccomp filter the kubelet asks the runtime for (securityProfile, in
// sandboxconfig.go) is chosen as the kubelet's getSeccompProfile chooses it
// (pkg/kubelet/kuberuntime/helpers.go): the container's
// securityContext.seccompProfile, else the pod's; with neither, Unconfined,
// or RuntimeDefault when the kubelet runs with --seccomp-default. A
// Localhost profile is the file localhostProfile names under the node's
// seccomp directory (/var/lib/kubelet/seccomp on a real node).
//
// What the kubelet refuses (Localhost without a localhostProfile, a path
// that is absolute or leaves the directory with "..", an unknown type) is
// ErrSeccompProfile, and the container waits in CreateContainerConfigError.
// The file itself is read by the runtime inside CreateContainer: a missing
// or invalid one is CreateContainerError.

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
