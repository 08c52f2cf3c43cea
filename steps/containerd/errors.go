package containerd

import "errors"

// Errors returned before containerd starts.
var (
	// ErrNotInstalled means no containerd binary (or no containerd-shim-runc-v2
	// beside it) was found on PATH: install Debian's package containerd.
	ErrNotInstalled = errors.New("containerd is not installed (Debian's package containerd: apt-get install containerd, or make deps)")
	// ErrRunning means a lab containerd of this state directory runs already.
	ErrRunning = errors.New("a lab containerd runs already for this state directory")
	// ErrBadConfig means a Config has a field containerd would refuse, or
	// that cannot be written into its TOML.
	ErrBadConfig = errors.New("bad containerd configuration")
)

// Errors returned while waiting for containerd.
var (
	// ErrNotAnswering means nothing answered CRI on the socket in time.
	ErrNotAnswering = errors.New("containerd is not answering")
)
