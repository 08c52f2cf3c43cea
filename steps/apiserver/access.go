package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// Access asks the authorizers (Node, then RBAC) whether the client's user may do verb on
// resource (optionally a subresource, a namespace and a name) without
// doing it: kubectl auth can-i, a SelfSubjectAccessReview in Kubernetes.
func (c *Client) Access(ctx context.Context, verb, resource, subresource, namespace, name string) (authn.User, rbac.Decision, error) {
	res, namespace, err := c.target(resource, namespace, false)
	if err != nil {
		return authn.User{}, rbac.Decision{}, err
	}
	u, err := c.authenticate()
	if err != nil {
		return u, rbac.Decision{}, err
	}
	var d rbac.Decision
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		_, dd, err := c.s.decide(tx, rbac.Attributes{User: u, Verb: verb, APIGroup: res.Group, Resource: res.Name, Subresource: subresource, Namespace: namespace, Name: name})
		if err != nil {
			return err
		}
		d = dd.review()
		if c.phases != nil {
			// the explanation an access review does not carry (see
			// ReviewReason) is in the narration: the API server's -v log
			answer := "no"
			if d.Allowed {
				answer = "yes"
			}
			c.report(Phase{Name: PhaseAuthorization, Plugin: dd.by(), Summary: fmt.Sprintf("access review: may %s %s? %s: %s", verb, res.Name, answer, d.Reason)})
		}
		return nil
	})
	return u, d, err
}

// Rules lists what the client's user may do in namespace (cluster-wide
// rules included): kubectl auth can-i --list.
func (c *Client) Rules(ctx context.Context, namespace string) (authn.User, []rbacv1.PolicyRule, error) {
	u, err := c.authenticate()
	if err != nil {
		return u, nil, err
	}
	var rules []rbacv1.PolicyRule
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		p, err := c.s.policyIn(tx)
		if err != nil {
			return err
		}
		rules = rbac.RulesFor(p, u, namespace)
		return nil
	})
	return u, rules, err
}

// Impersonate returns a client acting as target, if the client's user may
// impersonate it: kube-apiserver's impersonation filter, which runs after
// authentication and before everything else. The user needs the verb
// "impersonate" on resource "users" named target.Name, and on "groups"
// for each of target.Groups, each checked by RBAC in that order; the first
// refusal is 403 Forbidden, in kube's words:
//
//	users "developer" is forbidden: User "viewer" cannot impersonate resource "users" in API group "" at the cluster scope
//
// As kube-apiserver does, the groups are those the request names (the
// Impersonate-Group headers), never looked up: target is in
// system:authenticated unless it names it or system:unauthenticated
// (system:anonymous is in system:unauthenticated instead).
func (c *Client) Impersonate(ctx context.Context, target authn.User, opts ...ClientOption) (*Client, error) {
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	if target.Name == "" {
		// kube-apiserver: "requested [...] without impersonating a user"
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested groups %v without impersonating a user: add the Impersonate-User header", target.Groups))
	}
	checks := []rbac.Attributes{{User: u, Verb: "impersonate", Resource: "users", Name: target.Name}}
	for _, g := range target.Groups {
		checks = append(checks, rbac.Attributes{User: u, Verb: "impersonate", Resource: "groups", Name: g})
	}
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		for _, a := range checks {
			if _, err := c.authorize(tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	target.Groups = impersonatedGroups(target.Name, target.Groups)
	out := &Client{s: c.s, user: &target, via: c.via, impersonator: &u, phases: c.phases}
	if out.via == "" {
		out.via = "token file"
	}
	for _, o := range opts {
		o(out)
	}
	return out, nil
}

// impersonatedGroups adds system:authenticated (system:unauthenticated for
// system:anonymous) to the groups an impersonation names, as kube-apiserver
// does.
func impersonatedGroups(name string, groups []string) []string {
	groups = append([]string(nil), groups...)
	if name == authn.UserAnonymous {
		if !slices.Contains(groups, authn.GroupUnauthenticated) {
			groups = append(groups, authn.GroupUnauthenticated)
		}
		return groups
	}
	if !slices.Contains(groups, authn.GroupAuthenticated) && !slices.Contains(groups, authn.GroupUnauthenticated) {
		groups = append(groups, authn.GroupAuthenticated)
	}
	return groups
}

// AccessPath asks the authorizer whether the client's user may do verb
// (get, post...) on a path that names no resource (/version, /healthz,
// /api, /openapi/v3): RBAC's nonResourceURLs rules. The decision is
// returned; a refusal is also a 403 Forbidden error, in kube's words
// (forbidden: User "system:anonymous" cannot get path "/api").
func (c *Client) AccessPath(ctx context.Context, verb, path string) (rbac.Decision, error) {
	u, err := c.authenticate()
	if err != nil {
		return rbac.Decision{}, err
	}
	var d rbac.Decision
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		p, err := c.s.policyIn(tx)
		if err != nil {
			return err
		}
		a := rbac.Attributes{User: u, Verb: verb, Path: path}
		d = rbac.Authorize(p, a)
		if !d.Allowed {
			err := apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(rbac.ForbiddenMessage(a)))
			if c.phases != nil {
				c.report(Phase{Name: PhaseAuthorization, Plugin: "RBAC", Summary: "403 Forbidden: " + rbac.ForbiddenMessage(a), Details: []string{d.Reason}, Err: err})
			}
			return err
		}
		if c.phases != nil {
			c.report(Phase{Name: PhaseAuthorization, Plugin: "RBAC", Summary: strings.TrimPrefix(d.Reason, "RBAC: ")})
		}
		return nil
	})
	return d, err
}

// Authorize asks the authorizers (Node, then RBAC) whether the client's
// user may do what a names (its User is filled in), whether or not podlab
// serves the resource: the question of a SubjectAccessReview, and of a
// subresource the API server proxies (pods/log, pods/exec). The decision
// is returned; a refusal is also a 403 Forbidden error in kube's words
// (pods "web" is forbidden: User "viewer" cannot create resource
// "pods/exec" in API group "" in the namespace "default").
func (c *Client) Authorize(ctx context.Context, a rbac.Attributes) (rbac.Decision, error) {
	u, err := c.authenticate()
	if err != nil {
		return rbac.Decision{}, err
	}
	a.User = u
	var d rbac.Decision
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		_, dd, err := c.s.decide(tx, a)
		if err != nil {
			return err
		}
		d = dd.review()
		if !d.Allowed {
			// kube-apiserver's ForbiddenStatusError names the resource
			// without its subresource: pods "web" is forbidden: User
			// "viewer" cannot create resource "pods/exec" ...
			msg := rbac.ForbiddenMessage(a)
			if dd.node.Reason != "" {
				msg += ": " + dd.node.Reason
			}
			err := apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
			if c.phases != nil {
				c.report(Phase{Name: PhaseAuthorization, Plugin: dd.by(), Summary: "403 Forbidden: " + msg, Details: []string{d.Reason}, Err: err})
			}
			return err
		}
		if c.phases != nil {
			c.report(Phase{Name: PhaseAuthorization, Plugin: dd.by(), Summary: strings.TrimPrefix(strings.TrimPrefix(d.Reason, "RBAC: "), "Node: ")})
		}
		return nil
	})
	return d, err
}

// ReviewReason is the reason an access review (SelfSubjectAccessReview,
// SubjectAccessReview) reports for d, as kube-apiserver's authorizers give
// it: the allowing authorizer's reason, or for a refusal the Node
// authorizer's, if it gave one. kube-apiserver's RBAC authorizer gives no
// reason for a plain denial (`kubectl auth can-i` prints a bare "no"):
// what podlab's RBAC explains (what it looked at) stays in the API
// server's -v log and in podlab's own narration.
func ReviewReason(d rbac.Decision) string {
	if d.Allowed {
		return d.Reason
	}
	if i := strings.Index(d.Reason, rbac.NoPolicyMatched); i >= 0 {
		return strings.TrimSuffix(d.Reason[:i], "; ")
	}
	return d.Reason
}

// review is a decision as an access review reports it: the Node
// authorizer's, when it allowed or had a reason to refuse and RBAC did not
// allow either, else RBAC's.
func (dd decision) review() rbac.Decision {
	switch {
	case dd.node.Allowed:
		return rbac.Decision{Allowed: true, Reason: "Node: " + dd.nodeSummary}
	case dd.node.Reason != "" && !dd.rbac.Allowed:
		return rbac.Decision{Reason: "Node: " + dd.node.Reason + "; " + dd.rbac.Reason}
	}
	return dd.rbac
}
