package controllers

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// PodTemplateHashLabel is the label the Deployment controller puts on each
// ReplicaSet it makes, on the ReplicaSet's selector and on its pod template,
// so that the ReplicaSets of one Deployment never select each other's pods:
// pod-template-hash=7d4b9c8f6.
const PodTemplateHashLabel = "pod-template-hash" // appsv1.DefaultDeploymentUniqueLabelKey

// The annotations the Deployment controller keeps on its ReplicaSets (and
// the revision on the Deployment too).
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
)

// ComputeHash is kube-controller-manager's controller.ComputeHash: the
// 32-bit FNV-1a hash of the pod template, printed by go-spew the way
// hashutil.DeepHashObject prints it (k8s.io/utils/dump.ForHash: %#v with
// sorted map keys and methods disabled, so every field of the template
// counts, pointers by what they point to), followed by the collision count
// (when the Deployment has one) as 8 little-endian bytes, and the decimal
// number encoded with rand.SafeEncodeString (digits mapped onto
// "bcdfghjklmnpqrstvwxz2456789", so no words appear): "7d4b9c8f6".
//
// The hash covers every field of the Go struct, so it changes when a
// Kubernetes release adds a field to PodSpec even if nobody sets it: a
// Deployment's ReplicaSet is therefore found by comparing templates
// (equalIgnoreHash), never by recomputing the hash. With the k8s.io/api
// version podlab is built with, the name matches what a kube-controller-manager
// built with the same version computes.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	// DeepHashObject hashes the value, not the pointer: spew's output starts
	// with "(v1.PodTemplateSpec){".
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
