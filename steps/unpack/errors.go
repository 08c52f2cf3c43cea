package unpack

import "errors"

// Errors before anything is unpacked.
var (
	// ErrBundleExists is returned when the bundle directory already exists
	// and is not empty, and Options.Force is not set. Nothing is changed.
	ErrBundleExists = errors.New("bundle directory already exists")

	// ErrNotBundle is returned when Options.Force asks to replace a
	// directory that does not look like a bundle (it is not empty and has
	// no rootfs/ in it): podlab never deletes a directory it did not make.
	ErrNotBundle = errors.New("not a bundle directory")

	// ErrTooManyLayers is returned for an image of more than MaxLayers
	// layers, before anything is unpacked.
	ErrTooManyLayers = errors.New("too many layers")

	// ErrUnknownSnapshotter is returned for a snapshotter that is neither
	// native nor overlayfs.
	ErrUnknownSnapshotter = errors.New("unknown snapshotter")

	// ErrNoSnapshots is returned when the overlayfs snapshotter is asked
	// for without a snapshots directory (Options.Snapshots).
	ErrNoSnapshots = errors.New("no snapshots directory")

	// ErrBadIndex is returned when a snapshots directory's index cannot be
	// read. Nothing is changed.
	ErrBadIndex = errors.New("unreadable snapshots index")

	// ErrDigestAlgorithm is returned for a diff_id whose algorithm is
	// neither of the OCI image spec's, sha256 and sha512. Nothing is
	// unpacked.
	ErrDigestAlgorithm = errors.New("unsupported digest algorithm")
)

// Errors while applying layers. The temporary bundle is removed and the
// bundle directory is left as it was.
var (
	// ErrDiffIDMismatch is returned when the digest of a layer's
	// uncompressed tar (sha256 or sha512, the diff_id's own algorithm) is
	// not the diff_id the image config names for it.
	ErrDiffIDMismatch = errors.New("layer diff_id mismatch")

	// ErrZstdWindowTooLarge is returned when a zstd layer asks for a window
	// larger than MaxZstdWindow: it is refused before the memory is
	// allocated.
	ErrZstdWindowTooLarge = errors.New("zstd window too large")

	// ErrLayerCount is returned when the manifest and the config do not
	// name the same number of layers.
	ErrLayerCount = errors.New("manifest layers and config diff_ids differ in number")
)

// Errors while shifting a rootfs into a user namespace's range
// (ShiftOwnership, Options.Shift).
var (
	// ErrInvalidShift is returned for a range of no ids, or one past the
	// 32-bit id space. Nothing is changed.
	ErrInvalidShift = errors.New("invalid id shift")

	// ErrBadCapabilities is returned for a security.capability attribute
	// that is none of the kernel's three revisions.
	ErrBadCapabilities = errors.New("unreadable file capabilities")
)
