package discovery

import (
	"slices"

	"github.com/podlab/podlab/steps/apiserver"
)

// Subresources lists the subresources podlab's API server serves for a
// resource, as discovery names them after the slash ("pods/status" is
// "status"): the status subresource of every resource that has one, the
// pod's binding (the scheduler's write), log and exec (proxied to the
// kubelet), and the scale subresource of Deployments and ReplicaSets
// (`kubectl scale`). Kubernetes serves more (pods/attach, pods/eviction,
// nodes/proxy, namespaces/finalize...); podlab's discovery leaves out what
// podlab does not serve, so a client never finds a path that answers 404.
func Subresources(r apiserver.Resource) []string {
	var subs []string
	if r.HasStatus {
		subs = append(subs, "status")
	}
	switch r.GroupResource().String() {
	case "pods":
		subs = append(subs, "binding", "log", "exec")
	case "deployments.apps", "replicasets.apps":
		subs = append(subs, "scale")
	}
	slices.Sort(subs)
	return subs
}
