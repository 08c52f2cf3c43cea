// Package printers is kube-apiserver's server-side printing: the table
// `kubectl get` shows is computed by the API server, not by kubectl.
//
// kubectl get asks for a Table instead of the objects:
//
//	Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json
//
// and the server answers a meta.k8s.io/v1 Table: column definitions (name,
// type, format, description, priority) and one row per object, each row's
// cells plus the object itself, trimmed by the includeObject parameter to
// its metadata by default. kubectl only lays the cells out: it upper-cases
// the column names, hides the priority-1 columns unless -o wide, and takes
// the NAMESPACE column of -A and --show-labels from each row's metadata.
// That is why `kubectl get` shows the same columns for a resource whatever
// the kubectl release: they belong to the server (and a custom resource's
// columns to its additionalPrinterColumns).
//
// Columns and Cells are kube's printers (kubernetes/pkg/printers/internalversion)
// for the kinds podlab serves: the pod's STATUS is not a field but a
// summary of its phase and its containers' states (PodStatus), the AGE a
// rounded duration. TableConvertor puts them together for one object or a
// list. podlab's own kubectl-style commands (steps/kubectl) print from the
// same functions, so both show the same table.
package printers
