package apiserver

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/store"
)

// nodeRestriction runs the NodeRestriction admission plugin on a node's
// write, inside the write's transaction: obj is the object to store (create,
// update), old the one stored (update, delete). kube-apiserver runs it with
// the mutating plugins, after ServiceAccount; it changes nothing, it only
// refuses. Writes by anyone but a node pass without a phase.
func (c *Client) nodeRestriction(tx *store.Tx, u authn.User, op admission.Operation, res Resource, subresource, namespace, name string, obj, old Object) error {
	if _, isNode := authn.NodeIdentity(u); !isNode {
		return nil
	}
	req := admission.NodeRequest{
		User: u, Operation: op, Resource: res.GroupResource(), Subresource: subresource,
		Namespace: namespace, Name: name, Object: obj, OldObject: old,
		Node: func(node string) (*corev1.Node, error) {
			return getTyped[*corev1.Node](tx, mustResource("nodes"), "", node)
		},
	}
	notes, err := admission.NodeRestriction(req)
	return c.phase(PhaseMutatingAdmission, "NodeRestriction", notes, err)
}
