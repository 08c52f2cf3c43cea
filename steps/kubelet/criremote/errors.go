package criremote

import "errors"

// Errors of an endpoint.
var (
	// ErrEndpoint: the endpoint is not unix:///ABSOLUTE/PATH.
	ErrEndpoint = errors.New("bad CRI endpoint")
	// ErrUnreachable: nothing answers CRI on the endpoint's socket.
	ErrUnreachable = errors.New("no container runtime answers")
)

// Errors of the runtime process.
var (
	// ErrStartFailed: the runtime process exited, or did not answer on its
	// socket in time; its log says why.
	ErrStartFailed = errors.New("the container runtime did not start")
)
