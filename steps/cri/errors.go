package cri

import "errors"

// Errors of Listen, before anything is served.
var (
	// ErrNotSocket: the socket path exists and is something else (a file,
	// a directory); nothing is removed.
	ErrNotSocket = errors.New("the CRI socket path exists and is not a socket")
	// ErrInUse: another runtime answers on the socket.
	ErrInUse = errors.New("another runtime is serving the CRI socket")
)

// Errors of RunPodSandbox.
var (
	// ErrUserNamespacesUnsupported: this host or runtime cannot run a pod
	// in a user namespace of its own (userns_options mode POD); the error
	// says what is missing.
	ErrUserNamespacesUnsupported = errors.New("user namespaces are not supported here")
)
