// Package authn is the API server's first gate: authentication. It answers
// one question, "who is this?", as kube-apiserver's authenticators do, in
// this order (Union):
//
//   - X509: a TLS client certificate the cluster CA signed (--client-ca-file):
//     the subject's CN is the user, each O a group;
//   - Tokens: a bearer token of the static token file (--token-auth-file), a
//     CSV file of token,user,uid,"group1,group2".
//
// It never decides what the user may do; that is authorization (package
// rbac), the next gate.
package authn

// User is an authenticated identity: a name, a uid and the groups the user
// belongs to. Kubernetes keeps no User objects: users exist only in the
// authenticator's answers, and RBAC bindings name them by string.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// Well-known groups. Every authenticated request is in
// system:authenticated; system:masters bypasses authorization entirely in
// kube-apiserver (podlab binds it to cluster-admin instead, so the decision
// is visible in RBAC).
const (
	GroupMasters       = "system:masters"
	GroupAuthenticated = "system:authenticated"
	GroupNodes         = "system:nodes"
)

// InGroup reports whether u is a member of group.
func (u User) InGroup(group string) bool {
	for _, g := range u.Groups {
		if g == group {
			return true
		}
	}
	return false
}
