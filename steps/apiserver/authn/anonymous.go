package authn

// The identity of a request that carries no credentials at all.
// kube-apiserver v1.37 runs with --anonymous-auth=true by default: such a
// request is not refused by authentication but made by the user
// system:anonymous in the group system:unauthenticated, which RBAC then
// allows almost nothing (system:public-info-viewer: /healthz, /livez,
// /readyz, /version). So a bare `curl` of /api/v1/pods gets 403 Forbidden,
// not 401; a request with credentials that prove nothing (an unknown token,
// a certificate from another CA) gets 401.
const (
	UserAnonymous        = "system:anonymous"
	GroupUnauthenticated = "system:unauthenticated"
)

// Anonymous is the user of a request without credentials.
func Anonymous() User {
	return User{Name: UserAnonymous, Groups: []string{GroupUnauthenticated}}
}
