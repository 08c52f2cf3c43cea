package kubectl

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podlab/podlab/steps/apiserver"
)

// ScalePrecondition is what kubectl scale's --current-replicas and
// --resource-version ask of the object before it is scaled. Size -1 and
// ResourceVersion "" ask nothing.
type ScalePrecondition struct {
	Size            int
	ResourceVersion string
}

// PreconditionError says which precondition of a scale did not hold, in
// kubectl's words: "Expected replicas to be 3, was 2".
type PreconditionError struct {
	Precondition  string
	ExpectedValue string
	ActualValue   string
}

func (pe PreconditionError) Error() string {
	return fmt.Sprintf("Expected %s to be %s, was %s", pe.Precondition, pe.ExpectedValue, pe.ActualValue)
}

// RetryParams say how often, and for how long, a scale that lost a race is
// tried again.
type RetryParams struct {
	Interval, Timeout time.Duration
}

// ScaleRetry is kubectl scale's: every second, for five minutes.
func ScaleRetry() RetryParams { return RetryParams{Interval: time.Second, Timeout: 5 * time.Minute} }

// Scale sets a Deployment's or ReplicaSet's spec.replicas through its scale
// subresource, as kubectl scale (k8s.io/kubectl pkg/scale) does. With no
// precondition it sends a JSON merge patch, {"spec":{"replicas":N}}, which
// cannot conflict: whatever else changed, the count is N. With one, it
// reads the object, checks the precondition, and writes the scale at the
// resourceVersion it read; when another write came first (409 Conflict) it
// reads and checks again, every retry.Interval until retry.Timeout.
func Scale(ctx context.Context, c apiserver.Interface, resource, namespace, name string, replicas int32, pre *ScalePrecondition, retry RetryParams) (*autoscalingv1.Scale, error) {
	if replicas < 0 {
		return nil, fmt.Errorf("the replica count must be at least 0, not %d", replicas)
	}
	if pre == nil {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
		return scalePatch(ctx, c, resource, namespace, name, patch)
	}
	var out *autoscalingv1.Scale
	err := wait.PollUntilContextTimeout(ctx, retry.Interval, retry.Timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := c.Get(ctx, resource, namespace, name)
		if err != nil {
			return false, err
		}
		if err := pre.check(obj); err != nil {
			return false, err
		}
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, obj.GetResourceVersion(), replicas)
		out, err = scalePatch(ctx, c, resource, namespace, name, patch)
		if apierrors.IsConflict(err) {
			return false, nil // another write came first: read again
		}
		return err == nil, err
	})
	return out, err
}

func scalePatch(ctx context.Context, c apiserver.Interface, resource, namespace, name, patch string) (*autoscalingv1.Scale, error) {
	obj, err := c.Patch(ctx, resource, namespace, name, types.MergePatchType, []byte(patch), apiserver.PatchOptions{Subresource: "scale"})
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, fmt.Errorf("the scale subresource of %s %q answered a %T, not a Scale", resource, name, obj)
	}
	return s, nil
}

// check is kubectl's ScalePrecondition.validate, on the object whose scale
// it is (the scale's replicas and resourceVersion are the object's).
func (p *ScalePrecondition) check(obj apiserver.Object) error {
	var replicas *int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		replicas = o.Spec.Replicas
	case *appsv1.ReplicaSet:
		replicas = o.Spec.Replicas
	default:
		return fmt.Errorf("%T has no scale subresource", obj)
	}
	n := 1
	if replicas != nil {
		n = int(*replicas)
	}
	if p.Size != -1 && n != p.Size {
		return PreconditionError{"replicas", strconv.Itoa(p.Size), strconv.Itoa(n)}
	}
	if p.ResourceVersion != "" && obj.GetResourceVersion() != p.ResourceVersion {
		return PreconditionError{"resource version", p.ResourceVersion, obj.GetResourceVersion()}
	}
	return nil
}
