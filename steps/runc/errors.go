package runc

import "errors"

// Errors about the runtime binary itself.
var (
	// ErrRuntimeNotFound means the OCI runtime binary (runc, crun) does not
	// exist or cannot be executed. `make deps` installs runc into bin/.
	ErrRuntimeNotFound = errors.New("OCI runtime binary not found")
)

// Errors about the arguments of a call, found before runc runs.
var (
	// ErrInvalidID means a container ID that runc would refuse, or that would
	// escape the state directory (runc allows letters, digits, '_', '+', '-', '.').
	ErrInvalidID = errors.New("invalid container ID")

	// ErrNoBundle means the bundle directory does not exist.
	ErrNoBundle = errors.New("bundle directory not found")

	// ErrNoConfig means the bundle has no config.json, the OCI runtime spec
	// that `podlab spec` writes.
	ErrNoConfig = errors.New("bundle has no config.json")
)

// Errors about the container's state.
var (
	// ErrContainerNotFound means neither runc nor podlab knows the container ID.
	ErrContainerNotFound = errors.New("container not found")

	// ErrContainerExists means the container ID is already taken: IDs are
	// unique per runtime root, as a Pod's container names are unique per node.
	ErrContainerExists = errors.New("container already exists")

	// ErrNoLog means the container has no log file (its container.log was
	// removed, or an older podlab ran it in the foreground without one).
	ErrNoLog = errors.New("container has no log file")

	// ErrNoShim means the container's shim does not answer on its socket
	// (containers/<id>/shim.sock): the container exited and its shim with
	// it, or it runs in the foreground, which has no shim.
	ErrNoShim = errors.New("the container's shim is not running")
)

// Errors about runtime handlers (RuntimeClass's .handler), found before
// anything of a pod is made.
var (
	// ErrNoHandler means a handler name the node has no runtime for; a
	// *NoHandlerError says which.
	ErrNoHandler = errors.New("runtime handler not configured")

	// ErrInvalidHandler means a --runtime-handler that is not NAME=PATH
	// with a DNS-label name.
	ErrInvalidHandler = errors.New("invalid runtime handler")

	// ErrHybridCgroups means the handler's runtime refuses this host's
	// cgroups: crun runs no container on a hybrid host whose cgroup v2
	// mount has controllers.
	ErrHybridCgroups = errors.New("runtime refuses this host's cgroups")
)
