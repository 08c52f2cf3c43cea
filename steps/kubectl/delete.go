package kubectl

import (
	"fmt"
	"strings"
)

// DeletedLine is the line kubectl delete prints for each object it deleted
// (its DeleteOptions.PrintObj): the kind in lower case, qualified by its
// API group (`deployment.apps`), the name quoted, "deleted" ("force
// deleted" when the grace period is 0, as with --force), and for a
// namespaced object the namespace:
//
//	pod "web" deleted from default namespace
//	namespace "locked" deleted
func DeletedLine(kind, group, namespace string, namespaced bool, name string, force bool) string {
	kindString := strings.ToLower(kind)
	if group != "" {
		kindString += "." + group
	}
	op := "deleted"
	if force {
		op = "force deleted"
	}
	if namespaced {
		op = fmt.Sprintf("%s from %s namespace", op, namespace)
	}
	return fmt.Sprintf("%s %q %s", kindString, name, op)
}
