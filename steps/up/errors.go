package up

import "errors"

// Errors found before Up or Reset changes anything.
var (
	// ErrNoDemoImages means no mirror was given and the state directory has
	// no demo images for the in-process registry to serve: `make images`
	// builds them, offline.
	ErrNoDemoImages = errors.New("no demo images to serve")

	// ErrNotStateDir means Reset was asked to clear a directory that holds
	// none of what podlab makes (etcd/, nodes/, content/): it refuses.
	ErrNotStateDir = errors.New("not a podlab state directory")
)

// Errors of the chain itself.
var (
	// ErrUnschedulable means the scheduler found no node for the pod.
	ErrUnschedulable = errors.New("the scheduler found no node for the pod")

	// ErrNotRunning means the container did not stay running: it exited
	// (or never started) while the kubelet watched it.
	ErrNotRunning = errors.New("the container is not running")

	// ErrTimeout means a component did not do its part in time (a watch
	// event, a scheduling decision, a controller's object).
	ErrTimeout = errors.New("timed out")
)

// Errors of Exec.
var (
	// ErrNoContainer means the pod has no running container of that name
	// to exec into.
	ErrNoContainer = errors.New("no running container")
)
