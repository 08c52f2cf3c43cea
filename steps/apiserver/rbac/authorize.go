package rbac

import (
	"fmt"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// Policy is the RBAC objects the API server has stored: everything an
// authorization decision is made from. Authorize and the other functions
// only read it.
type Policy struct {
	Roles               []rbacv1.Role
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
}

// Attributes describe one request to authorize, as kube-apiserver's
// authorizer.Attributes do.
type Attributes struct {
	User authn.User
	// Verb is the API verb: get, list, watch, create, update, patch, delete,
	// deletecollection, or a special one (bind, escalate, impersonate). Not
	// the HTTP method: a GET of one object is "get", of a collection "list",
	// with ?watch=true "watch".
	Verb string
	// APIGroup is "" for the core group (pods, nodes, events), "apps" for
	// deployments, "rbac.authorization.k8s.io" for roles.
	APIGroup string
	// Resource is the plural resource name, "pods".
	Resource string
	// Subresource is "status", "binding", "log", ..., or "".
	Subresource string
	// Namespace is the request's namespace; "" for cluster-scoped resources
	// (nodes, namespaces, clusterroles) and for requests across all
	// namespaces. With "", only ClusterRoleBindings can allow.
	Namespace string
	// Name is the object's name; "" on create and list.
	Name string
	// FieldSelector is a list or watch's field selector, parsed before the
	// request is authorized, as kube-apiserver's request info does: the
	// Node authorizer lets a kubelet list pods only with
	// spec.nodeName=<its node>. RBAC ignores it.
	FieldSelector fields.Requirements
	// Path is the URL path of a non-resource request (/healthz, /version,
	// /api), which has no Resource. It is ignored when Resource is set.
	Path string
}

// IsResourceRequest reports whether a names an API resource rather than a
// non-resource URL.
func (a Attributes) IsResourceRequest() bool {
	return a.Resource != "" || a.Path == ""
}

// Decision is Authorize's answer. Reason says which binding allowed the
// request or what was looked at before refusing it.
type Decision struct {
	Allowed bool
	Reason  string
}

// Authorize decides one request the way kube-apiserver's RBAC authorizer
// does: deny unless some rule, reached through a binding that names the
// user or one of its groups, allows it. It looks at the ClusterRoleBindings
// first, then at the RoleBindings in a.Namespace, and stops at the first
// allowing rule.
func Authorize(p *Policy, a Attributes) Decision {
	if p == nil {
		return Decision{Reason: "no RBAC policy loaded"}
	}
	var (
		allowed bool
		reason  string
		errs    []error
	)
	visitBindings(p, a.User, a.Namespace, func(b binding, rules []rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		for i := range rules {
			if ruleAllows(&rules[i], &a) {
				allowed = true
				reason = string(b.appendTo(append(make([]byte, 0, 160), "RBAC: allowed by "...)))
				return false
			}
		}
		return true
	})
	if allowed {
		return Decision{Allowed: true, Reason: reason}
	}
	return Decision{Reason: denyReason(p, &a, errs)}
}

// NoPolicyMatched starts the Reason of every refusal of Authorize: podlab's
// explanation, for its -v log and its own narration. kube-apiserver's RBAC
// authorizer gives no reason for a plain denial, so an access review does
// not report it (see apiserver.ReviewReason).
const NoPolicyMatched = "no RBAC policy matched"

// denyReason explains a refusal: what was asked, which bindings apply to
// the user, and which of them reference missing roles.
func denyReason(p *Policy, a *Attributes, errs []error) string {
	var b strings.Builder
	fmt.Fprintf(&b, NoPolicyMatched+": no rule allows user %q (groups=%q) to %s",
		a.User.Name, a.User.Groups, describeOperation(a))
	var looked []string
	visitBindings(p, a.User, a.Namespace, func(bd binding, _ []rbacv1.PolicyRule, _ error) bool {
		looked = append(looked, bd.String())
		return true
	})
	switch {
	case len(looked) > 0:
		b.WriteString("; looked at ")
		b.WriteString(strings.Join(looked, ", "))
	case a.Namespace != "":
		fmt.Fprintf(&b, "; no ClusterRoleBinding, and no RoleBinding in namespace %q, names the user or one of its groups", a.Namespace)
	default:
		b.WriteString("; no ClusterRoleBinding names the user or one of its groups")
	}
	switch len(errs) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "; RBAC: %v", errs[0])
	default:
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		fmt.Fprintf(&b, "; RBAC: [%s]", strings.Join(msgs, ", "))
	}
	return b.String()
}

// describeOperation is kube-apiserver's wording for a denied request in
// its logs: `"create" resource "pods" in namespace "default"`.
func describeOperation(a *Attributes) string {
	if !a.IsResourceRequest() {
		return fmt.Sprintf("%q nonResourceURL %q", a.Verb, a.Path)
	}
	var b strings.Builder
	resource := a.Resource
	if a.APIGroup != "" {
		resource += "." + a.APIGroup
	}
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	fmt.Fprintf(&b, "%q resource %q", a.Verb, resource)
	if a.Name != "" {
		fmt.Fprintf(&b, " named %q", a.Name)
	}
	if a.Namespace != "" {
		fmt.Fprintf(&b, " in namespace %q", a.Namespace)
	} else {
		b.WriteString(" cluster-wide")
	}
	return b.String()
}

// ForbiddenMessage is the text of kube-apiserver's 403 for a refused
// request:
//
//	User "viewer" cannot create resource "pods" in API group "" in the namespace "default"
//
// The API server prefixes it with what was refused (`pods is forbidden: `)
// and may append the decision's reason.
func ForbiddenMessage(a Attributes) string {
	if !a.IsResourceRequest() {
		return fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q",
			a.User.Name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope",
		a.User.Name, a.Verb, resource, a.APIGroup)
}

// RuleAllows reports whether one rule allows the request, ignoring who
// asks: the verb, API group, resource (or subresource) and name must all
// match, "*" matching anything.
func RuleAllows(rule rbacv1.PolicyRule, a Attributes) bool {
	return ruleAllows(&rule, &a)
}

func ruleAllows(r *rbacv1.PolicyRule, a *Attributes) bool {
	if !hasOrAll(r.Verbs, a.Verb, rbacv1.VerbAll) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(r.NonResourceURLs, a.Path)
	}
	return hasOrAll(r.APIGroups, a.APIGroup, rbacv1.APIGroupAll) &&
		resourceMatches(r.Resources, a.Resource, a.Subresource) &&
		resourceNameMatches(r.ResourceNames, a.Name)
}

// hasOrAll reports whether set holds want or the wildcard all.
func hasOrAll(set []string, want, all string) bool {
	for _, s := range set {
		if s == want || s == all {
			return true
		}
	}
	return false
}

// resourceMatches matches "pods" (no subresource), "pods/status"
// (resource/subresource exactly), "*/status" (that subresource of every
// resource) and "*". "pods" does not match a request for pods/status.
func resourceMatches(ruleResources []string, resource, subresource string) bool {
	for _, rr := range ruleResources {
		if rr == rbacv1.ResourceAll {
			return true
		}
		if subresource == "" {
			if rr == resource {
				return true
			}
			continue
		}
		// rr == resource+"/"+subresource, without building the string.
		if len(rr) == len(resource)+1+len(subresource) && rr[len(resource)] == '/' &&
			strings.HasPrefix(rr, resource) && strings.HasSuffix(rr, subresource) {
			return true
		}
		if len(rr) == len(subresource)+2 && strings.HasPrefix(rr, "*/") && strings.HasSuffix(rr, subresource) {
			return true
		}
	}
	return false
}

// resourceNameMatches: an empty resourceNames list does not restrict; a
// non-empty one must hold the name, so a create or list (no name) never
// matches it.
func resourceNameMatches(names []string, name string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// nonResourceURLMatches: "*", an exact path, or a prefix ending in "*"
// ("/api/*").
func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}

// RulesFor returns every rule the user holds in namespace: those of the
// ClusterRoleBindings naming the user, then those of the RoleBindings in
// namespace (none when namespace is ""). It is what `kubectl auth can-i
// --list` shows, and what the escalation check compares against. Bindings
// to missing roles contribute nothing. The rules are copies.
func RulesFor(p *Policy, u authn.User, namespace string) []rbacv1.PolicyRule {
	rules, _ := rulesFor(p, u, namespace)
	out := make([]rbacv1.PolicyRule, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&out[i])
	}
	return out
}

// rulesFor is RulesFor without the copy, with the errors resolving
// bindings' roles.
func rulesFor(p *Policy, u authn.User, namespace string) ([]rbacv1.PolicyRule, []error) {
	if p == nil {
		return nil, nil
	}
	var (
		rules []rbacv1.PolicyRule
		errs  []error
	)
	visitBindings(p, u, namespace, func(_ binding, rs []rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		}
		rules = append(rules, rs...)
		return true
	})
	return rules, errs
}

// RoleRules returns the rules of the role a binding in namespace refers
// to: a Role in that same namespace, or a ClusterRole. namespace is "" for
// a ClusterRoleBinding, which may only refer to a ClusterRole. The rules
// are the policy's own; do not modify them. A missing role is
// ErrRoleNotFound, with kube-apiserver's message.
func RoleRules(p *Policy, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		for i := range p.ClusterRoles {
			if p.ClusterRoles[i].Name == ref.Name {
				return p.ClusterRoles[i].Rules, nil
			}
		}
		return nil, &notFoundError{resource: "clusterrole", name: ref.Name}
	case "Role":
		if namespace == "" {
			return nil, fmt.Errorf("%w: a ClusterRoleBinding may only reference a ClusterRole, not Role %q", ErrUnsupportedRoleRef, ref.Name)
		}
		for i := range p.Roles {
			if p.Roles[i].Name == ref.Name && p.Roles[i].Namespace == namespace {
				return p.Roles[i].Rules, nil
			}
		}
		return nil, &notFoundError{resource: "role", name: ref.Name}
	default:
		return nil, fmt.Errorf("%w: kind %q (want Role or ClusterRole)", ErrUnsupportedRoleRef, ref.Kind)
	}
}

// notFoundError is ErrRoleNotFound worded as kube-apiserver's lister
// does: `clusterrole.rbac.authorization.k8s.io "x" not found`.
type notFoundError struct {
	resource, name string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s.%s %q not found", e.resource, rbacv1.GroupName, e.name)
}

func (e *notFoundError) Is(target error) bool { return target == ErrRoleNotFound }

// binding is one binding and the subject in it that named the user: the
// source of a decision.
type binding struct {
	crb     *rbacv1.ClusterRoleBinding
	rb      *rbacv1.RoleBinding
	subject *rbacv1.Subject
}

// String describes the binding as kube-apiserver does. A RoleBinding is
// written name/namespace, as kube-apiserver writes it (not namespace/name).
func (b binding) String() string {
	return string(b.appendTo(make([]byte, 0, 128)))
}

// appendTo is String without fmt: it runs on every allowed request.
//
//	ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"
//	RoleBinding "developer-edit/default" of ClusterRole "edit" to User "developer"
func (b binding) appendTo(buf []byte) []byte {
	var ref rbacv1.RoleRef
	var ns string
	if b.crb != nil {
		buf = append(buf, "ClusterRoleBinding "...)
		buf = strconv.AppendQuote(buf, b.crb.Name)
		ref = b.crb.RoleRef
	} else {
		buf = append(buf, "RoleBinding "...)
		buf = strconv.AppendQuote(buf, b.rb.Name+"/"+b.rb.Namespace)
		ref, ns = b.rb.RoleRef, b.rb.Namespace
	}
	buf = append(buf, " of "...)
	buf = append(buf, ref.Kind...)
	buf = append(buf, ' ')
	buf = strconv.AppendQuote(buf, ref.Name)
	buf = append(buf, " to "...)
	buf = append(buf, b.subject.Kind...)
	buf = append(buf, ' ')
	if b.subject.Kind == rbacv1.ServiceAccountKind {
		// A service account is written name/namespace too.
		saNamespace := b.subject.Namespace
		if saNamespace == "" {
			saNamespace = ns
		}
		return strconv.AppendQuote(buf, b.subject.Name+"/"+saNamespace)
	}
	return strconv.AppendQuote(buf, b.subject.Name)
}

// visitBindings calls fn for every binding that applies to u, with the
// rules of the role it references (or the error resolving it):
// ClusterRoleBindings first, then the RoleBindings in namespace. fn
// returns false to stop.
func visitBindings(p *Policy, u authn.User, namespace string, fn func(b binding, rules []rbacv1.PolicyRule, err error) bool) {
	for i := range p.ClusterRoleBindings {
		crb := &p.ClusterRoleBindings[i]
		j, ok := appliesTo(u, crb.Subjects, "")
		if !ok {
			continue
		}
		rules, err := RoleRules(p, "", crb.RoleRef)
		if !fn(binding{crb: crb, subject: &crb.Subjects[j]}, rules, err) {
			return
		}
	}
	if namespace == "" {
		return
	}
	for i := range p.RoleBindings {
		rb := &p.RoleBindings[i]
		if rb.Namespace != namespace {
			continue
		}
		j, ok := appliesTo(u, rb.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := RoleRules(p, namespace, rb.RoleRef)
		if !fn(binding{rb: rb, subject: &rb.Subjects[j]}, rules, err) {
			return
		}
	}
}

// appliesTo returns the index of the first subject naming u.
func appliesTo(u authn.User, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i := range subjects {
		if appliesToUser(u, &subjects[i], namespace) {
			return i, true
		}
	}
	return 0, false
}

// appliesToUser matches a User by name, a Group by membership (the groups
// authentication reported, system:authenticated included), a
// ServiceAccount by its username system:serviceaccount:<ns>:<name>, its
// namespace defaulting to the binding's.
func appliesToUser(u authn.User, s *rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.Name == s.Name
	case rbacv1.GroupKind:
		return u.InGroup(s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		return ns != "" && serviceAccountMatches(ns, s.Name, u.Name)
	default:
		return false
	}
}

// ServiceAccountPrefix starts every service account's user name.
const ServiceAccountPrefix = "system:serviceaccount:"

// serviceAccountMatches reports whether username is
// system:serviceaccount:<namespace>:<name>, without building it.
func serviceAccountMatches(namespace, name, username string) bool {
	rest, ok := strings.CutPrefix(username, ServiceAccountPrefix)
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, namespace)
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, ":")
	return ok && rest == name
}
