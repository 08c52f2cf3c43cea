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

import "strings"

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

// NodeUserPrefix starts a kubelet's user name: system:node:<node>.
const NodeUserPrefix = "system:node:"

// NodeIdentity says whether u is a node (a kubelet), and which: as
// kube-apiserver's default node identifier, a node is a user named
// system:node:<name> in the group system:nodes. isNode is true with an
// empty name for a user in system:nodes whose name has the prefix but no
// node after it: such a request is refused, not treated as an ordinary
// user's. A user named system:node:x outside the group is not a node.
func NodeIdentity(u User) (name string, isNode bool) {
	if !u.InGroup(GroupNodes) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Name, NodeUserPrefix)
	if !ok {
		return "", false
	}
	return name, true
}
