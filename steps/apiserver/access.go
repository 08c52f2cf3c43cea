package apiserver

import (
	"context"

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
		switch {
		case dd.node.Allowed:
			d = rbac.Decision{Allowed: true, Reason: "Node: " + dd.nodeSummary}
		case dd.node.Reason != "" && !dd.rbac.Allowed:
			d = rbac.Decision{Reason: "Node: " + dd.node.Reason + "; " + dd.rbac.Reason}
		default:
			d = dd.rbac
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
