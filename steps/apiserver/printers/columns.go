package printers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Columns returns the column definitions kube-apiserver v1.37 sends for a
// kind, in order: kubernetes/pkg/printers/internalversion's, with the same
// names, types, formats, descriptions (taken from the API types' own
// documentation, as kube does) and priorities (1: shown only with
// -o wide). kubectl prints the names upper-cased. Roles, ClusterRoles and
// LimitRanges have no printer there: they get the API server's default
// table, NAME and CREATED AT.
func Columns(kind string) ([]metav1.TableColumnDefinition, error) {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	name := metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: meta["name"]}
	age := metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: meta["creationTimestamp"]}
	switch kind {
	case "Pod":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
			{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
			{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
			age,
			{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
			{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
			{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
			{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
		}, nil
	case "Node":
		info := corev1.NodeSystemInfo{}.SwaggerDoc()
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Status", Type: "string", Description: "The status of the node"},
			{Name: "Roles", Type: "string", Description: "The roles of the node"},
			age,
			{Name: "Version", Type: "string", Description: info["kubeletVersion"]},
			{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
			{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
			{Name: "OS-Image", Type: "string", Priority: 1, Description: info["osImage"]},
			{Name: "Kernel-Version", Type: "string", Priority: 1, Description: info["kernelVersion"]},
			{Name: "Container-Runtime", Type: "string", Priority: 1, Description: info["containerRuntimeVersion"]},
		}, nil
	case "Namespace":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Status", Type: "string", Description: "The status of the namespace"},
			age,
		}, nil
	case "Event":
		ev := corev1.Event{}.SwaggerDoc()
		return []metav1.TableColumnDefinition{
			{Name: "Last Seen", Type: "string", Description: ev["lastTimestamp"]},
			{Name: "Type", Type: "string", Description: ev["type"]},
			{Name: "Reason", Type: "string", Description: ev["reason"]},
			{Name: "Object", Type: "string", Description: ev["involvedObject"]},
			{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
			{Name: "Source", Type: "string", Priority: 1, Description: ev["source"]},
			{Name: "Message", Type: "string", Description: ev["message"]},
			{Name: "First Seen", Type: "string", Priority: 1, Description: ev["firstTimestamp"]},
			{Name: "Count", Type: "string", Priority: 1, Description: ev["count"]},
			{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: meta["name"]},
		}, nil
	case "Deployment":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
			{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
			age,
			{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
			{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
		}, nil
	case "ReplicaSet":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
			{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
			{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
			age,
			{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
			{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
		}, nil
	case "Lease":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
			age,
		}, nil
	case "RuntimeClass":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Handler", Type: "string", Description: nodev1.RuntimeClass{}.SwaggerDoc()["handler"]},
			age,
		}, nil
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
			age,
		}, nil
	case "Role", "ClusterRole", "LimitRange":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Created At", Type: "date", Description: meta["creationTimestamp"]},
		}, nil
	case "RoleBinding", "ClusterRoleBinding":
		// kube describes ROLE from v1beta1's documentation, whose text
		// lacks v1's "This field is immutable."
		what := "roleBinding"
		role := rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]
		if kind == "ClusterRoleBinding" {
			what, role = "clusterRoleBinding", rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]
		}
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Role", Type: "string", Description: role},
			age,
			{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + what},
			{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + what},
			{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + what},
		}, nil
	case "ResourceQuota":
		return []metav1.TableColumnDefinition{
			name,
			{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
			{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
			age,
		}, nil
	}
	return nil, fmt.Errorf("no table columns for kind %q", kind)
}
