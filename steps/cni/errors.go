package cni

import "errors"

// Errors of the configuration (Render, WriteConfList, Open).
var (
	// ErrBadPodCIDR: the pod CIDR does not parse as an IPv4 or IPv6 CIDR.
	ErrBadPodCIDR = errors.New("bad pod CIDR")
	// ErrBadTemplate: a value the configuration needs is missing or wrong
	// (a bridge name longer than 15 bytes, a relative dataDir).
	ErrBadTemplate = errors.New("bad network configuration")
)

// Errors of ADD and DEL (Setup, Teardown).
var (
	// ErrNoNetwork: the runtime's conf_dir holds no network configuration.
	ErrNoNetwork = errors.New("no network configuration")
	// ErrBadAttachment: the sandbox's id, network namespace or port
	// mappings are not usable.
	ErrBadAttachment = errors.New("bad network attachment")
)
