// Package trace rebuilds the timeline of a pod from what the cluster
// remembers about it: the chain ("kubectl run" to a running
// process) as it really happened, stage by stage, with the component that
// did each stage and the store revision it wrote.
//
// Nothing in Kubernetes keeps such a timeline, yet two things in the store
// add up to one:
//
//   - The watch log. Every write of the pod is a revision of the store
//     (etcd's role), and a watch from an old revision replays them all, in
//     order: the API server's create (ADDED), the scheduler's binding
//     (spec.nodeName set), each status the kubelet wrote (phase,
//     containerStatuses, conditions), the deletionTimestamp a delete
//     request set, and the kubelet's final delete (DELETED). Comparing
//     each version with the one before says which stage it was.
//   - The Events. Components record what they did as Event objects: the
//     replicaset-controller's SuccessfulCreate, the scheduler's Scheduled,
//     the kubelet's Pulling, Pulled, Created, Started and Killing. Each is a
//     write too, with its own revision, its source component, and its time.
//
// Revisions order every write exactly, across processes. Times are another
// matter: the store keeps no clock, and Kubernetes timestamps in objects
// (creationTimestamp, a condition's lastTransitionTime) are stored to the
// second. An Event's time is known to the nanosecond, because client-go
// names an event after it (web.17d2c5f4a3b1e20: the hex is UnixNano), and
// podlab's recorder does the same. A pod write's time is placed within the
// second it recorded, between the timed writes before and after it: next
// to a write of the same component when there is one (a component writes
// an event and the status one after the other), else at the earliest
// moment possible. Such times are marked Estimated. T=0 is the create: the
// pod's creationTimestamp, unless an Event of its creator (a ReplicaSet's
// SuccessfulCreate) pins it closer.
//
// The watch log is compacted as the store grows (10,000 events by
// default): a watch from revision 1 then fails with "too old resource
// version", and the log holds only the writes after the compacted
// revision. The timeline then says from which revision on it is complete,
// and what it could still learn from the objects themselves.
//
// Pod and Deployment read through an apiserver.Interface (kubectl's view:
// list, watch) and return a Timeline; they never print. WriteText,
// WriteJSON and WriteMermaid format one.
package trace
