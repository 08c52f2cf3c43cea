package pull

import "errors"

// Errors when reading a reference.
var (
	// ErrBadReference is returned for an image reference that cannot be
	// parsed ("nginx:", "UPPER/case", "a@sha256:short").
	ErrBadReference = errors.New("invalid image reference")
)

// Errors while talking to the registry.
var (
	// ErrRegistryUnreachable is returned when the registry cannot be
	// contacted at all (connection refused, DNS failure, TLS failure).
	ErrRegistryUnreachable = errors.New("registry unreachable")

	// ErrManifestUnknown is returned when the registry has no manifest for
	// the tag or digest asked for.
	ErrManifestUnknown = errors.New("manifest not found in registry")

	// ErrNoMatchingPlatform is returned when an image index has no manifest
	// for the platform asked for. The error lists the platforms it has.
	ErrNoMatchingPlatform = errors.New("no manifest for the requested platform")

	// ErrUnsupportedMediaType is returned for a manifest podlab cannot pull,
	// such as a Docker schema 1 manifest.
	ErrUnsupportedMediaType = errors.New("unsupported manifest media type")

	// ErrTooLarge is returned, before anything is read, for a manifest or
	// index larger than MaxManifestSize, an image config larger than
	// MaxConfigSize, or indexes nested deeper than MaxIndexDepth: they are
	// read into memory whole, and a node's images must not be able to make
	// its runtime run out of it. The error names the blob, its size and the
	// limit. It is returned by Pull and by the content store's readers.
	ErrTooLarge = errors.New("image metadata too large")

	// ErrUnsupportedDigest is returned for a digest whose algorithm podlab
	// cannot verify (it verifies sha256 and sha512, the OCI image spec's
	// registered algorithms).
	ErrUnsupportedDigest = errors.New("unsupported digest algorithm")
)

// Errors while writing the content store.
var (
	// ErrDigestMismatch is returned when a downloaded blob's sha256 is not
	// the digest the manifest names. The blob is discarded.
	ErrDigestMismatch = errors.New("blob digest mismatch")

	// ErrSizeMismatch is returned when a downloaded blob's size is not the
	// size the manifest names. The blob is discarded.
	ErrSizeMismatch = errors.New("blob size mismatch")
)

// Errors while reading the content store.
var (
	// ErrImageNotFound is returned when the content store holds no image by
	// that reference.
	ErrImageNotFound = errors.New("image not found in the content store")

	// ErrNotLayout is returned when a directory exists but is not an OCI
	// image layout podlab can use.
	ErrNotLayout = errors.New("not an OCI image layout")
)
