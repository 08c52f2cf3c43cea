package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// EscalationError is ConfirmNoEscalation's refusal: who tried, and the
// rules they do not hold. errors.Is(err, ErrEscalation) is true.
type EscalationError struct {
	User authn.User
	// Missing are the requested rules the user does not hold, compacted
	// (one rule per resource, its verbs merged) and sorted.
	Missing []rbacv1.PolicyRule
	// ResolutionErrors are the user's bindings whose roles could not be
	// found: they may be why a rule is missing.
	ResolutionErrors []error
}

// Error is kube-apiserver's message:
//
//	user "developer" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//	{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}
func (e *EscalationError) Error() string {
	lines := make([]string, len(e.Missing))
	for i, r := range e.Missing {
		lines[i] = CompactString(r)
	}
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		e.User.Name, e.User.Groups, strings.Join(lines, "\n"))
	if len(e.ResolutionErrors) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", e.ResolutionErrors)
	}
	return msg
}

// Is makes errors.Is(err, ErrEscalation) true.
func (e *EscalationError) Is(target error) bool { return target == ErrEscalation }

// ConfirmNoEscalation refuses to let u grant, in namespace ("" for
// cluster-wide roles and bindings), rules u does not hold: every requested
// rule must be covered by RulesFor(p, u, namespace). It is the check
// kube-apiserver runs when a Role or ClusterRole is written, and when a
// binding is written (with the referenced role's rules). It returns nil or
// an *EscalationError.
func ConfirmNoEscalation(p *Policy, u authn.User, namespace string, requested []rbacv1.PolicyRule) error {
	owner, errs := rulesFor(p, u, namespace)
	ok, missing := Covers(owner, requested)
	if ok {
		return nil
	}
	compact := CompactRules(missing)
	slices.SortStableFunc(compact, func(a, b rbacv1.PolicyRule) int {
		return strings.Compare(CompactString(a), CompactString(b))
	})
	compact = slices.CompactFunc(compact, func(a, b rbacv1.PolicyRule) bool {
		return CompactString(a) == CompactString(b)
	})
	return &EscalationError{User: u, Missing: compact, ResolutionErrors: errs}
}

// ConfirmRoleWrite is the whole check kube-apiserver's Role and ClusterRole
// storage runs on a create or update by u: allowed if u may "escalate" the
// role (verb escalate on roles, or clusterroles when namespace is "", with
// the name from the request URL: "" on create), else only if u already
// holds every rule the role grants.
func ConfirmRoleWrite(p *Policy, u authn.User, namespace, name string, rules []rbacv1.PolicyRule) error {
	resource := "roles"
	if namespace == "" {
		resource = "clusterroles"
	}
	escalate := Attributes{User: u, Verb: "escalate", APIGroup: rbacv1.GroupName, Resource: resource, Namespace: namespace, Name: name}
	if Authorize(p, escalate).Allowed {
		return nil
	}
	return ConfirmNoEscalation(p, u, namespace, rules)
}

// ConfirmBindingWrite is the whole check kube-apiserver's RoleBinding and
// ClusterRoleBinding storage runs on a create or update by u of a binding
// in namespace ("" for a ClusterRoleBinding) referencing ref: allowed if u
// may "bind" the referenced role (verb bind on roles or clusterroles named
// ref.Name, in the binding's namespace), else only if the role exists and
// u already holds every rule it grants.
func ConfirmBindingWrite(p *Policy, u authn.User, namespace string, ref rbacv1.RoleRef) error {
	var resource string
	switch ref.Kind {
	case "ClusterRole":
		resource = "clusterroles"
	case "Role":
		resource = "roles"
	default:
		return fmt.Errorf("%w: kind %q (want Role or ClusterRole)", ErrUnsupportedRoleRef, ref.Kind)
	}
	bind := Attributes{User: u, Verb: "bind", APIGroup: rbacv1.GroupName, Resource: resource, Namespace: namespace, Name: ref.Name}
	if Authorize(p, bind).Allowed {
		return nil
	}
	rules, err := RoleRules(p, namespace, ref)
	if err != nil {
		return err
	}
	return ConfirmNoEscalation(p, u, namespace, rules)
}

// Covers reports whether the owner rules cover every requested rule, and
// returns the parts that are not covered. Requested rules are broken down
// into single (verb, API group, resource, resource name) tuples first, so
// two owner rules may together cover one requested rule. A requested "*"
// is a value like any other: only an owner "*" covers it.
func Covers(owner, requested []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var uncovered []rbacv1.PolicyRule
	for _, req := range requested {
		for _, sub := range BreakdownRule(req) {
			covered := false
			for i := range owner {
				if ruleCovers(&owner[i], &sub) {
					covered = true
					break
				}
			}
			if !covered {
				uncovered = append(uncovered, sub)
			}
		}
	}
	return len(uncovered) == 0, uncovered
}

// BreakdownRule splits a rule into rules of one verb, one API group, one
// resource and at most one resource name each (or one verb and one
// non-resource URL).
func BreakdownRule(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var subs []rbacv1.PolicyRule
	for _, group := range rule.APIGroups {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				if len(rule.ResourceNames) == 0 {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}})
					continue
				}
				for _, name := range rule.ResourceNames {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}, ResourceNames: []string{name}})
				}
			}
		}
	}
	for _, url := range rule.NonResourceURLs {
		for _, verb := range rule.Verbs {
			subs = append(subs, rbacv1.PolicyRule{NonResourceURLs: []string{url}, Verbs: []string{verb}})
		}
	}
	return subs
}

// ruleCovers reports whether owner covers sub, a rule of BreakdownRule.
func ruleCovers(owner, sub *rbacv1.PolicyRule) bool {
	verbs := slices.Contains(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)
	groups := slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)
	var names bool
	if len(sub.ResourceNames) == 0 {
		// An owner limited to some names does not cover all of them.
		names = len(owner.ResourceNames) == 0
	} else {
		names = len(owner.ResourceNames) == 0 || hasAll(owner.ResourceNames, sub.ResourceNames)
	}
	return verbs && groups && names &&
		resourcesCoverAll(owner.Resources, sub.Resources) &&
		nonResourceURLsCoverAll(owner.NonResourceURLs, sub.NonResourceURLs)
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// resourcesCoverAll: "*" covers everything, "pods/status" is covered by
// itself or by "*/status".
func resourcesCoverAll(owner, want []string) bool {
	if slices.Contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, w := range want {
		if slices.Contains(owner, w) {
			continue
		}
		_, sub, ok := strings.Cut(w, "/")
		if !ok || !slices.Contains(owner, "*/"+sub) {
			return false
		}
	}
	return true
}

func nonResourceURLsCoverAll(owner, want []string) bool {
	for _, w := range want {
		covered := false
		for _, o := range owner {
			if o == w || (strings.HasSuffix(o, "*") && strings.HasPrefix(w, strings.TrimRight(o, "*"))) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// CompactRules merges rules that differ only in their verbs (one API
// group, one resource, at most one resource name, no URLs), keeping the
// order in which each resource first appears, as kube-apiserver does for
// its escalation message.
func CompactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct {
		group, resource string
		hasName         bool
		name            string
	}
	var out []rbacv1.PolicyRule
	index := map[key]int{}
	for _, r := range rules {
		simple := len(r.APIGroups) == 1 && len(r.Resources) == 1 && len(r.ResourceNames) <= 1 && len(r.NonResourceURLs) == 0
		if !simple {
			out = append(out, *r.DeepCopy())
			continue
		}
		k := key{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.hasName, k.name = true, r.ResourceNames[0]
		}
		if i, ok := index[k]; ok {
			for _, v := range r.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// CompactString writes a rule the way kube-apiserver's escalation message
// does, leaving out empty fields:
//
//	{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, values []string) {
		if len(values) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, values))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
