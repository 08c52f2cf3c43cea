package pki

import "errors"

// Errors of reading the CA. Each is wrapped with the file and what to do.
var (
	// ErrNoCA means the state directory has no CA yet: `podlab init` makes
	// it. IssueNode returns it rather than making a CA nobody trusts.
	ErrNoCA = errors.New("the cluster has no CA")

	// ErrBadCA means ca.crt or ca.key cannot be used: unreadable, not a
	// CA, expired, or the key is not the certificate's. The fix is to
	// start the PKI over (remove pki/ and kubeconfigs/, run init again).
	ErrBadCA = errors.New("the cluster CA cannot be used")
)

// Errors of the options given.
var (
	// ErrBadNodeName means a node name is not a DNS subdomain, or would
	// share its files with another credential.
	ErrBadNodeName = errors.New("bad node name")
)
