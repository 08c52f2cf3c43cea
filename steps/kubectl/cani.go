package kubectl

import "slices"

// kubectl auth can-i's known verbs (k8s.io/kubectl/pkg/cmd/auth): a verb
// outside them is still asked (RBAC answers for any string, and a rule with
// "*" allows it), but kubectl warns first.
var (
	resourceVerbs       = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "use", "bind", "impersonate", "*", "approve", "sign", "escalate", "attest"}
	nonResourceURLVerbs = []string{"get", "put", "post", "head", "options", "delete", "patch", "*"}
)

// CanIWarnings are the warnings kubectl auth can-i prints before it asks,
// each to be printed as "Warning: TEXT" on stderr: a verb that is not one
// of Kubernetes' ("verb 'fly' is not a known verb"), for a resource or for
// a non-resource URL (nonResourceURL).
func CanIWarnings(verb string, nonResourceURL bool) []string {
	known := resourceVerbs
	if nonResourceURL {
		known = nonResourceURLVerbs
	}
	if slices.Contains(known, verb) {
		return nil
	}
	// kubectl's message ends with a newline of its own, and its
	// WarningPrinter adds one: an empty line follows the warning
	return []string{"verb '" + verb + "' is not a known verb\n"}
}
