package remote

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/rbac"
)

// AccessReview asks the API server whether the client's user may do verb
// on resource (a subresource, a namespace, a name: each optional), without
// doing it: a SelfSubjectAccessReview, what kubectl auth can-i sends. The
// decision's reason is the server's (which binding and role decided).
func (c *Client) AccessReview(ctx context.Context, verb, resource, subresource, namespace, name string) (rbac.Decision, error) {
	res, err := apiserver.LookupResource(resource)
	if err != nil {
		return rbac.Decision{}, err
	}
	switch {
	case !res.Namespaced:
		namespace = ""
	case namespace == "":
		namespace = apiserver.DefaultNamespace
	}
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: res.Group, Resource: res.Name, Subresource: subresource, Namespace: namespace, Name: name,
		},
	}}
	out := &authorizationv1.SelfSubjectAccessReview{}
	if err := c.authz.Post().Resource("selfsubjectaccessreviews").Body(sar).Do(ctx).Into(out); err != nil {
		return rbac.Decision{}, c.wireError("asking whether the user may "+verb+" "+resource, err)
	}
	return rbac.Decision{Allowed: out.Status.Allowed, Reason: out.Status.Reason}, nil
}

// RulesReview lists what the client's user may do in namespace (rules
// that hold in every namespace included): a SelfSubjectRulesReview, what
// kubectl auth can-i --list sends.
func (c *Client) RulesReview(ctx context.Context, namespace string) ([]rbacv1.PolicyRule, error) {
	if namespace == "" {
		namespace = apiserver.DefaultNamespace
	}
	srr := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}
	out := &authorizationv1.SelfSubjectRulesReview{}
	if err := c.authz.Post().Resource("selfsubjectrulesreviews").Body(srr).Do(ctx).Into(out); err != nil {
		return nil, c.wireError("listing the user's rules in namespace "+namespace, err)
	}
	var rules []rbacv1.PolicyRule
	for _, r := range out.Status.ResourceRules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	for _, r := range out.Status.NonResourceRules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
	}
	return rules, nil
}
