package rbac

import "errors"

// Errors while resolving a binding's roleRef.
var (
	// ErrRoleNotFound: a binding references a Role or ClusterRole that does
	// not exist. Authorize treats such a binding as granting nothing;
	// RoleRules returns it (wrapped, in kube-apiserver's words:
	// `clusterrole.rbac.authorization.k8s.io "x" not found`).
	ErrRoleNotFound = errors.New("role not found")

	// ErrUnsupportedRoleRef: a roleRef whose kind is neither Role nor
	// ClusterRole, or a ClusterRoleBinding referencing a Role.
	ErrUnsupportedRoleRef = errors.New("unsupported role reference")
)

// Errors while writing roles and bindings.
var (
	// ErrEscalation: a user tried to create or update a role, or a binding,
	// granting permissions the user does not hold. The error is an
	// *EscalationError listing the missing rules; the API server answers it
	// with 403 Forbidden.
	ErrEscalation = errors.New("attempting to grant RBAC permissions not currently held")
)
