package trace

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// Deployment reads the timeline of a Deployment: its create and scales,
// the ReplicaSets the deployment-controller made for it, and the
// timelines of all their pods (deleted ones too), merged in revision
// order. T=0 is the Deployment's create.
func Deployment(ctx context.Context, c apiserver.Interface, namespace, name string, opts ...Option) (*Timeline, error) {
	o := newOptions(opts)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	namespace, list, upTo, err := readByName(ctx, c, "deployments", "deployment", namespace, name)
	if err != nil {
		return nil, err
	}
	podList, err := c.List(ctx, "pods", namespace, apiserver.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("tracing deployment %s/%s: listing its pods: %w", namespace, name, forbiddenHint(err))
	}
	listed, newest, err := listEvents(ctx, c, namespace)
	if err != nil {
		return nil, fmt.Errorf("tracing deployment %s/%s: %w", namespace, name, err)
	}
	logs, err := readLogs(ctx, c, o, upTo,
		logRequest{resource: "deployments", namespace: namespace},
		logRequest{resource: "replicasets", namespace: namespace},
		logRequest{resource: "pods", namespace: namespace},
		eventsLog(namespace, newest))
	if err != nil {
		return nil, fmt.Errorf("tracing deployment %s/%s: %w", namespace, name, err)
	}
	deps, rss, pods, events := logs[0], logs[1], logs[2], logs[3]

	var uid types.UID
	if len(list.Items) > 0 {
		uid = list.Items[0].GetUID()
	} else {
		for _, ev := range deps.events {
			if ev.Object.GetName() == name {
				uid = ev.Object.GetUID()
			}
		}
	}
	if uid == "" {
		return nil, neverCreated("deployment", namespace, name, deps)
	}
	evs := eventOccurrences(events, listed)

	b := &builder{}
	b.objectRows("deployments", "deployment", versionsOf(deps.events, uid), "", "")
	for _, o := range evs {
		if o.about("Deployment", name, uid) {
			b.rows = append(b.rows, o.row("deployment/"+name))
		}
	}
	// the ReplicaSets it owns, by uid, in the order they appear
	owned := map[types.UID]bool{}
	var rsOrder []types.UID
	for _, ev := range rss.events {
		if ref := metav1.GetControllerOf(ev.Object); ref != nil && ref.UID == uid && !owned[ev.Object.GetUID()] {
			owned[ev.Object.GetUID()] = true
			rsOrder = append(rsOrder, ev.Object.GetUID())
		}
	}
	for _, rsUID := range rsOrder {
		b.objectRows("replicasets", "replicaset", versionsOf(rss.events, rsUID), "deployment-controller", name)
	}
	// their pods: those of the log, and those older than a compacted log
	current := map[types.UID]*corev1.Pod{}
	var podOrder []types.UID
	ownedPod := func(p *corev1.Pod) bool {
		ref := metav1.GetControllerOf(p)
		return ref != nil && owned[ref.UID]
	}
	for _, obj := range podList.Items {
		if p := obj.(*corev1.Pod); ownedPod(p) {
			current[p.UID] = p
			podOrder = append(podOrder, p.UID)
		}
	}
	seen := map[types.UID]bool{}
	for _, ev := range pods.events {
		p := ev.Object.(*corev1.Pod)
		if ownedPod(p) && !seen[p.UID] && current[p.UID] == nil {
			podOrder = append(podOrder, p.UID)
		}
		seen[p.UID] = true
	}
	for _, pu := range podOrder {
		b.pod(versionsOf(pods.events, pu), current[pu], evs, pods.compactedAt())
	}
	tl := b.timeline("Deployment", namespace, name, uid, upTo, deps, rss, pods, events)
	tl.fill()
	return tl, nil
}

// objectRows adds the writes of a Deployment or a ReplicaSet that matter
// to the chain: its create, the changes of spec.replicas, its deletion.
// (Their status writes are the controllers' bookkeeping and are left
// out.) by names the controller that makes such objects ("" for a user's),
// for the owner named owner.
func (b *builder) objectRows(resource, singular string, versions []apiserver.WatchEvent, by, owner string) {
	var prev apiserver.Object
	for _, we := range versions {
		obj := we.Object
		rev, _ := revisionOf(obj.GetResourceVersion())
		key := fmt.Sprintf("/registry/%s/%s/%s", resource, obj.GetNamespace(), obj.GetName())
		r := row{Entry: Entry{Revision: rev, Resource: resource, Component: "kube-apiserver", Actor: User,
			Object: singular + "/" + obj.GetName()}, by: "user"}
		if by != "" {
			r.Actor, r.by = ControllerManager, by
		}
		asked := "asked by a user the object does not name (kube-apiserver's audit log would)"
		if by != "" {
			asked = fmt.Sprintf("asked by the %s (system:kube-controller-manager) for Deployment %s", by, owner)
		}
		switch {
		case we.Type == apiserver.Added:
			r.Stage, r.clock = StageCreated, second(obj.GetCreationTimestamp().Time)
			r.Detail = fmt.Sprintf("stored %s (replicas %d), %s", key, replicas(obj), asked)
		case we.Type == apiserver.Deleted:
			r.Stage = StageDeleted
			r.Detail = fmt.Sprintf("%s removed", key)
		case prev != nil && replicas(prev) != replicas(obj):
			r.Stage = StageUpdated
			r.Detail = fmt.Sprintf("spec.replicas %d -> %d, %s", replicas(prev), replicas(obj), asked)
		default:
			prev = obj
			continue
		}
		b.rows = append(b.rows, r)
		prev = obj
	}
}

// replicas is spec.replicas of a Deployment or ReplicaSet (1 when unset).
func replicas(obj apiserver.Object) int32 {
	var r *int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r = o.Spec.Replicas
	case *appsv1.ReplicaSet:
		r = o.Spec.Replicas
	}
	if r == nil {
		return 1
	}
	return *r
}
