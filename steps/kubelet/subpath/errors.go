package subpath

import "errors"

// Errors about a subPath's text, found before anything is opened. The API
// server's validation refuses both; the kubelet checks again.
var (
	// ErrAbsolute means a subPath that starts with "/": a subPath is
	// relative to its volume.
	ErrAbsolute = errors.New("subPath must not be an absolute path")

	// ErrBacksteps means a subPath with a ".." component.
	ErrBacksteps = errors.New("subPath must not contain '..'")
)

// Errors while resolving a path inside its volume.
var (
	// ErrEscape means the path leads out of its volume: a symlink on the way
	// (or at its end) is absolute, or climbs above the volume with "..".
	// Nothing is opened, created or mounted.
	ErrEscape = errors.New("the path leads out of its volume")

	// ErrUnsafeMount means Clean found a mount it could not unmount under
	// the directory it was asked to remove, and removed nothing: removing
	// through a mount would remove the mounted files (a volume's, or the
	// host's).
	ErrUnsafeMount = errors.New("a mount is left under the directory")
)
