package rest

import (
	"fmt"
	"net/http"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
)

// mayCreateReview checks that the user may create the review itself, as
// RBAC's system:basic-user role lets every authenticated user.
func mayCreateReview(r *http.Request, c *apiserver.Client, resource string) error {
	u, rules, err := c.Rules(r.Context(), "")
	if err != nil {
		return err
	}
	a := rbac.Attributes{User: u, Verb: "create", APIGroup: "authorization.k8s.io", Resource: resource}
	if slices.ContainsFunc(rules, func(p rbacv1.PolicyRule) bool { return rbac.RuleAllows(p, a) }) {
		return nil
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: resource}, "", fmt.Errorf("%s", rbac.ForbiddenMessage(a)))
}

// accessReview answers a SelfSubjectAccessReview: may I do this? (kubectl
// auth can-i).
func (h *Handler) accessReview(w http.ResponseWriter, r *http.Request, c *apiserver.Client) {
	if err := mayCreateReview(r, c, "selfsubjectaccessreviews"); err != nil {
		writeError(w, r, err)
		return
	}
	sar := &authorizationv1.SelfSubjectAccessReview{}
	if err := decodeObject(w, r, sar, authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")); err != nil {
		writeError(w, r, err)
		return
	}
	ctx := r.Context()
	switch ra, nra := sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes; {
	case ra != nil:
		// a served resource, named in a namespace when it lives in one: the
		// gate's own decision (with RBAC's reason)
		if res, err := apiserver.LookupResource(ra.Resource); err == nil && ra.Resource != "*" && (ra.Namespace != "" || !res.Namespaced) {
			_, d, err := c.Access(ctx, ra.Verb, ra.Resource, ra.Subresource, ra.Namespace, ra.Name)
			if err != nil {
				writeError(w, r, err)
				return
			}
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: d.Allowed, Reason: apiserver.ReviewReason(d)}
			break
		}
		// a resource podlab does not serve, "*", or every namespace (-A):
		// what RBAC's rules say
		u, rules, err := c.Rules(ctx, ra.Namespace)
		if err != nil {
			writeError(w, r, err)
			return
		}
		a := rbac.Attributes{User: u, Verb: ra.Verb, APIGroup: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
		sar.Status.Allowed = slices.ContainsFunc(rules, func(p rbacv1.PolicyRule) bool { return rbac.RuleAllows(p, a) })
	case nra != nil:
		d, err := c.AccessPath(ctx, nra.Verb, nra.Path)
		if err != nil && !apierrors.IsForbidden(err) {
			writeError(w, r, err)
			return
		}
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: d.Allowed, Reason: apiserver.ReviewReason(d)}
	default:
		writeError(w, r, apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "", field.ErrorList{
			field.Invalid(field.NewPath("spec", "resourceAttributes"), nil, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}))
		return
	}
	writeJSON(w, http.StatusCreated, sar)
}

// rulesReview answers a SelfSubjectRulesReview: what may I do in this
// namespace? (kubectl auth can-i --list).
func (h *Handler) rulesReview(w http.ResponseWriter, r *http.Request, c *apiserver.Client) {
	if err := mayCreateReview(r, c, "selfsubjectrulesreviews"); err != nil {
		writeError(w, r, err)
		return
	}
	srr := &authorizationv1.SelfSubjectRulesReview{}
	if err := decodeObject(w, r, srr, authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview")); err != nil {
		writeError(w, r, err)
		return
	}
	_, rules, err := c.Rules(r.Context(), srr.Spec.Namespace)
	if err != nil {
		writeError(w, r, err)
		return
	}
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, p := range rules {
		if len(p.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: p.Verbs, APIGroups: p.APIGroups, Resources: p.Resources, ResourceNames: p.ResourceNames})
	}
	srr.Status = st
	writeJSON(w, http.StatusCreated, srr)
}

// subjectAccessReview answers a SubjectAccessReview: may this user do
// this? What a kubelet asks (webhook authorization) before it serves
// logs or exec to the API server, or to anyone with a certificate. The
// asker needs "create subjectaccessreviews": nodes have it through the
// Node authorizer (NodeRules), the scheduler and controller-manager
// through their roles.
func (h *Handler) subjectAccessReview(w http.ResponseWriter, r *http.Request, c *apiserver.Client) {
	ctx := r.Context()
	if _, err := c.Authorize(ctx, rbac.Attributes{Verb: "create", APIGroup: "authorization.k8s.io", Resource: "subjectaccessreviews"}); err != nil {
		writeError(w, r, err)
		return
	}
	sar := &authorizationv1.SubjectAccessReview{}
	if err := decodeObject(w, r, sar, authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")); err != nil {
		writeError(w, r, err)
		return
	}
	gk := schema.GroupKind{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}
	spec := sar.Spec
	// kube's ValidateSubjectAccessReviewSpec
	switch {
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		writeError(w, r, apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes"), spec.NonResourceAttributes, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}))
		return
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		writeError(w, r, apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec", "nonResourceAttributes"), spec.NonResourceAttributes, `cannot be specified in combination with resourceAttributes`)}))
		return
	case spec.User == "" && len(spec.Groups) == 0:
		writeError(w, r, apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec", "user"), spec.User, `at least one of user or group must be specified`)}))
		return
	}
	subject := h.s.ClientFor(authn.User{Name: spec.User, Groups: spec.Groups, UID: spec.UID}, "SubjectAccessReview")
	var d rbac.Decision
	var err error
	if ra := spec.ResourceAttributes; ra != nil {
		d, err = subject.Authorize(ctx, rbac.Attributes{Verb: ra.Verb, APIGroup: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name})
	} else {
		d, err = subject.AccessPath(ctx, spec.NonResourceAttributes.Verb, spec.NonResourceAttributes.Path)
	}
	if err != nil && !apierrors.IsForbidden(err) {
		writeError(w, r, err)
		return
	}
	sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: d.Allowed, Reason: apiserver.ReviewReason(d)}
	writeJSON(w, http.StatusCreated, sar)
}
