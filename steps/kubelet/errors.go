package kubelet

import (
	"errors"
	"fmt"

	"github.com/podlab/podlab/steps/kubelet/subpath"
)

// Errors about the pod a stage is asked to work on, found before anything
// runs.
var (
	// ErrNotOnThisNode means the pod is not bound to this kubelet's node
	// (spec.nodeName is empty or another node): the scheduler has not placed
	// it here, and this kubelet does not touch it.
	ErrNotOnThisNode = errors.New("pod is not bound to this node")

	// ErrNoSuchContainer means the pod's spec has no container by that name.
	ErrNoSuchContainer = errors.New("no such container in the pod")

	// ErrOutOfOrder means the stage does not fit the container's state: its
	// container for this restart is already created or running (nothing to
	// pull or create), or not created yet (nothing to start). The
	// error names the stage that comes next.
	ErrOutOfOrder = errors.New("stage out of order")

	// ErrNoStage means a stage name that is none of the kubelet's: the
	// error lists them (and, for unpack and spec, says the runtime does
	// those inside CreateContainer).
	ErrNoStage = errors.New("no stage")

	// ErrNoSandbox means a container stage needs the pod's sandbox (its
	// network, IPC and UTS namespaces) and there is none yet.
	ErrNoSandbox = errors.New("the pod has no sandbox")
)

// Errors from the image stage: each becomes the container's waiting reason.
var (
	// ErrUnknownPullPolicy means an imagePullPolicy other than Always,
	// IfNotPresent and Never. The API server's validation refuses it; the
	// kubelet checks again.
	ErrUnknownPullPolicy = errors.New("unknown imagePullPolicy")

	// ErrImageNeverPull means imagePullPolicy Never and an image the node's
	// content store does not have (waiting reason ErrImageNeverPull).
	ErrImageNeverPull = errors.New("image not present with pull policy of Never")

	// ErrImageInspect means the runtime's ImageStatus failed, so the
	// kubelet cannot tell whether the image is there (waiting reason
	// ImageInspectError, event InspectFailed; kubelet's images.ErrImageInspect).
	ErrImageInspect = errors.New("ImageInspectError")
)

// Errors about a pod's user namespace (hostUsers: false). The sandbox is
// not made: nothing of the pod runs, and never as host root.
var (
	// ErrUserNamespacesUnsupported means something a user namespace needs
	// is missing: the kernel's user namespaces, idmapped mounts on the
	// state directory's file system, a runc that idmaps bind mounts, or cat
	// on the kubelet's PATH (it holds the new namespaces while they are
	// pinned). The error names which.
	ErrUserNamespacesUnsupported = errors.New("user namespaces are not supported here")

	// ErrUserNamespacesExhausted means every range of host ids is held by
	// a pod: delete pods with hostUsers: false to free some.
	ErrUserNamespacesExhausted = errors.New("no free user namespace range")

	// ErrUserNamespaceRecord means a pod's userns file is not one the
	// kubelet wrote. Its range is not reused while the file is there.
	ErrUserNamespaceRecord = errors.New("unreadable user namespace record")

	// ErrUserNamespaceClaimed means the range a pod's record names is
	// claimed machine-wide (statedir.UsernsClaimsDir) by a pod of another
	// state directory or node that still holds it: the two pods would share
	// host ids. The error names both.
	ErrUserNamespaceClaimed = errors.New("user namespace range claimed by another pod")
)

// Errors while making the container's config (waiting reason
// CreateContainerConfigError): the pod asks for something podlab will not
// or cannot do.
var (
	// ErrPrivileged means securityContext.privileged: true. podlab runs every
	// node's containers on one shared machine and refuses them.
	ErrPrivileged = errors.New("privileged containers are refused")

	// ErrRunAsNonRoot means securityContext.runAsNonRoot: true and a
	// container that would run as uid 0.
	ErrRunAsNonRoot = errors.New("container has runAsNonRoot and would run as root")

	// ErrSeccompProfile means a securityContext.seccompProfile the kubelet
	// refuses: an unknown type, or Localhost without a localhostProfile or
	// with one that is absolute or leaves the node's seccomp directory
	// with "..". (A profile file that is missing or invalid is
	// spec.ErrSeccompProfile, found by the runtime: CreateContainerError.)
	ErrSeccompProfile = errors.New("invalid seccomp profile")

	// ErrUnsupported means a part of the PodSpec podlab's kubelet does not
	// implement (an init container, a volume type other than emptyDir and
	// hostPath, an environment variable source it cannot resolve).
	ErrUnsupported = errors.New("not supported by podlab's kubelet")

	// ErrSysctlForbidden means a pod sets a sysctl the kubelet's allowlist
	// does not have (neither safe nor in --allowed-unsafe-sysctls), or one
	// of the namespace the pod shares with the node: the pod is rejected
	// (Failed, reason SysctlForbidden) and nothing of it is made.
	ErrSysctlForbidden = errors.New("pod rejected")
)

// Errors when the kubelet is set up.
var (
	// ErrBadSysctlPattern means a pattern of --allowed-unsafe-sysctls
	// that is not a sysctl name (with an optional trailing "*"), or names
	// sysctls no kernel namespace isolates (kernel.sysrq, vm.*): allowing
	// one would let a pod change the whole node. The kubelet refuses to
	// start.
	ErrBadSysctlPattern = errors.New("--allowed-unsafe-sysctls")
)

// SubPathError is a volumeMount's subPath the kubelet would not, or could
// not, prepare: it is absolute, has "..", leads out of its volume through a
// symlink (errors.Is(err, subpath.ErrEscape)), or goes through a file. The
// container waits in CreateContainerConfigError.
//
// The pod's status and its Failed event carry Message, the kubelet's own
// text, which names the volumeMount and the container and nothing of the
// node's files (whoever may read the pod may not read the node). Error adds
// why, for the node's administrator: the kubelet logs that part.
type SubPathError struct {
	VolumeMount, Container, SubPath string
	Err                             error
}

// Message is what the kubelet writes in the container's waiting message and
// in the Failed event.
func (e *SubPathError) Message() string {
	switch {
	case errors.Is(e.Err, subpath.ErrAbsolute):
		return fmt.Sprintf("error SubPath `%s` must not be an absolute path", e.SubPath)
	case errors.Is(e.Err, subpath.ErrBacksteps):
		return fmt.Sprintf("unable to provision SubPath `%s`: must not contain '..'", e.SubPath)
	}
	return fmt.Sprintf("failed to prepare subPath for volumeMount %q of container %q", e.VolumeMount, e.Container)
}

func (e *SubPathError) Error() string { return e.Message() + ": " + e.Err.Error() }

func (e *SubPathError) Unwrap() error { return e.Err }

// statusMessage is what the pod's status and events say of err: the
// kubelet's text, without the node's details, for a SubPathError.
func statusMessage(err error) string {
	if se, ok := errors.AsType[*SubPathError](err); ok {
		return se.Message()
	}
	return err.Error()
}
