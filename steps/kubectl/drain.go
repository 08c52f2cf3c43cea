package kubectl

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podlab/podlab/steps/apiserver"
)

// DrainOptions are kubectl drain's: --grace-period (nil: each pod's own)
// and --timeout (0: wait as long as ctx lets).
type DrainOptions struct {
	GracePeriodSeconds *int64
	Timeout            time.Duration
	// OnPod, if not nil, hears of each pod as it is deleted or left.
	OnPod func(pod, what string)
}

// DrainResult is what Drain did.
type DrainResult struct {
	// Cordoned: it set spec.unschedulable (false: the node was cordoned
	// already, or has no Node object).
	Cordoned bool
	// Deleted and Ignored (DaemonSet's and mirror pods) are
	// namespace/name.
	Deleted, Ignored []string
}

// ErrDrainTimeout: pods were still on the node when the timeout ran out.
var ErrDrainTimeout = errors.New("pods are still on the node")

// Drain empties a node as `kubectl drain --ignore-daemonsets
// --disable-eviction` does: it cordons it (spec.unschedulable: the
// scheduler sends it nothing new), deletes each pod bound to it but
// those a DaemonSet owns (their controller would put them back at once)
// and mirror pods, then waits until every deleted pod is gone: its
// kubelet stops it, then removes the object. A node without a Node
// object has nothing to cordon; its pods, if any, are drained all the same.
func Drain(ctx context.Context, c apiserver.Interface, node string, o DrainOptions) (*DrainResult, error) {
	res := &DrainResult{}
	if err := cordon(ctx, c, node, res); err != nil {
		return res, err
	}
	list, err := c.List(ctx, "pods", "", apiserver.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return res, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	waiting := map[types.UID]string{}
	for _, obj := range list.Items {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if ignored(pod) {
			res.Ignored = append(res.Ignored, key)
			if o.OnPod != nil {
				o.OnPod(key, "ignored (DaemonSet-managed or a mirror pod)")
			}
			continue
		}
		_, err := c.Delete(ctx, "pods", pod.Namespace, pod.Name, apiserver.DeleteOptions{GracePeriodSeconds: o.GracePeriodSeconds})
		if err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("evicting pod %s from node %s: %w", key, node, err)
		}
		res.Deleted = append(res.Deleted, key)
		waiting[pod.UID] = key
		if o.OnPod != nil {
			o.OnPod(key, "deleted")
		}
	}
	if len(waiting) == 0 {
		return res, nil
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.List(ctx, "pods", "", apiserver.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil // the API server may be restarting: try again
		}
		left = left[:0]
		for _, obj := range list.Items {
			if key, ok := waiting[obj.GetUID()]; ok {
				left = append(left, key)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return res, fmt.Errorf("draining node %s: %w after %s: %v (its kubelet stops them and removes them: is `podlab kubelet --node %s` running? --grace-period 0 deletes them at once)", node, ErrDrainTimeout, timeout, left, node)
	}
	return res, nil
}

func cordon(ctx context.Context, c apiserver.Interface, node string, res *DrainResult) error {
	obj, err := c.Get(ctx, "nodes", "", node)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cordoning node %s: %w", node, err)
	}
	n, ok := obj.(*corev1.Node)
	if !ok || n.Spec.Unschedulable {
		return nil
	}
	_, err = c.Patch(ctx, "nodes", "", node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), apiserver.PatchOptions{})
	if err != nil {
		return fmt.Errorf("cordoning node %s: %w", node, err)
	}
	res.Cordoned = true
	return nil
}

// ignored: pods drain leaves, DaemonSet's and mirror pods.
func ignored(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}
