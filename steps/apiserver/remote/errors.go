package remote

import "errors"

// Errors of making a client.
var (
	// ErrNoKubeconfig: the kubeconfig file does not exist. `podlab init`
	// writes one per identity under <state-dir>/kubeconfigs/.
	ErrNoKubeconfig = errors.New("no kubeconfig")
)

// Errors of a call.
var (
	// ErrUnreachable: the request did not get an answer from the API
	// server (nothing listening, a refused TLS handshake, a broken
	// connection). The call may be retried; status errors from the server
	// never wrap it.
	ErrUnreachable = errors.New("the API server cannot be reached")
)
