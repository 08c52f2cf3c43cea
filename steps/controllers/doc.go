// Package controllers is podlab's kube-controller-manager: the Deployment
// controller, the ReplicaSet controller, the garbage collector, the node
// lifecycle controller (nodelifecycle.go: a node whose kubelet stopped
// renewing its Lease goes Ready=Unknown and is tainted unreachable), the
// taint-eviction controller (taint.go) and, with --allocate-node-cidrs, the
// node IPAM controller. It is
// step 4 of the chain for a Deployment ("the controller-manager notices
// the new Deployment through its watch, creates its ReplicaSet, whose
// controller creates the pods"), and like every Kubernetes component it is
// only a client of the API server: it reads through informers and writes
// through apiserver.Interface, as the user system:kube-controller-manager,
// past authentication, RBAC, admission and validation like anyone else.
//
// # The controller pattern
//
// Every controller is the same loop:
//
//  1. Watch. An informer lists a resource once, then watches it from the
//     list's resourceVersion, keeping a local copy (the cache) that the
//     controller reads instead of asking the API server. Each change calls
//     an event handler, which does nothing but put a key, "namespace/name",
//     in the controller's work queue.
//  2. Compare. A worker takes a key and reads the object from the cache:
//     what it asks for (spec: 3 replicas of this template) against what is
//     (the pods that exist, their status). It does not matter what the
//     event was, or how many events were folded into one key: the
//     controller looks at the whole state every time (level-triggered, not
//     edge-triggered), so a missed or repeated event does no harm.
//  3. Act. It closes the gap through the API server: create a ReplicaSet,
//     change its spec.replicas, create or delete pods, write the status.
//     It changes nothing else; its writes are events for the other
//     controllers (a ReplicaSet created by the Deployment controller is
//     work for the ReplicaSet controller, whose pods are work for the
//     scheduler, then a kubelet).
//  4. Repeat. A write that fails (a conflict: someone changed the object
//     since the cache saw it) puts the key back in the queue with a
//     growing delay; the next try reads the fresh object.
//
// # Owners
//
// What a controller creates carries an owner reference to it
// (metadata.ownerReferences, with controller: true and
// blockOwnerDeletion: true): a ReplicaSet names its Deployment, a pod its
// ReplicaSet, by kind, name and uid. A controller acts only on what it
// controls, adopts orphans its selector matches, and releases what it no
// longer matches. The garbage collector uses the same references the
// other way: an object whose owners are all gone is deleted, so deleting
// a Deployment removes its ReplicaSets, and they their pods.
//
// # The pod-template-hash
//
// A Deployment never runs pods itself. For its pod template it makes a
// ReplicaSet named NAME-<hash>, where the hash is computed from the
// template (ComputeHash); the hash is also a label (pod-template-hash) on
// the ReplicaSet, in its selector and on its pods, so that the ReplicaSets
// of one Deployment never count each other's pods. Changing the template
// (a new image) makes a new ReplicaSet with another hash: a rollout is
// scaling the new ReplicaSet up and the old ones down, within maxSurge
// (pods above spec.replicas) and maxUnavailable (pods below it that may
// be not Ready), or, for the Recreate strategy, all old pods first.
//
// # Taints that evict
//
// A node taint with effect NoExecute (node.kubernetes.io/unreachable, which
// the node lifecycle controller sets on a node whose kubelet went silent, or
// one set by hand with kubectl taint) does more than keep new pods away: the
// taint-eviction controller deletes the pods already bound there. A pod
// that does not tolerate the taint goes at once; one that tolerates it for
// tolerationSeconds goes when that time has passed since the taint's
// timeAdded; one that tolerates it without a time limit stays. Every pod
// has such tolerations for not-ready and unreachable, 300 s, from the API
// server's DefaultTolerationSeconds admission plugin: a node that is gone
// five minutes loses its pods, and their ReplicaSets make new ones, which
// the scheduler places on nodes without the taint. Removing the taint in
// time cancels the deletion. Each deletion is the event TaintManagerEviction
// "Marking for deletion Pod NS/NAME" on the pod.
//
// # Where this differs from kube-controller-manager
//
// The logic follows Kubernetes v1.37.2 (pkg/controller/deployment,
// replicaset and garbagecollector), and the log lines are printed as
// kube-controller-manager prints them at -v=4, with the Kubernetes file
// and line that logs each message (see internal/klog). Simplified: one
// worker per controller (kube runs 5, 5 and 20); pods are created one at a
// time rather than in slow-start batches; no rollback (spec.rollbackTo is
// gone from apps/v1); the garbage collector covers deployments,
// replicasets and pods, uses only background propagation, and does not
// strip dangling owner references from objects that still have a live
// owner; adoption and release are updates, not patches; a Deployment's
// revision annotation is written by an update of the Deployment (kube
// writes it with the status, which podlab's status subresource does not
// allow). Once (--once) replaces watching with repeated listing: a pass
// lists everything, lets each controller handle what changed, and passes
// repeat until one writes nothing.
package controllers
