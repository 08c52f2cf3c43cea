package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

var describeCommand = &cli.Command{
	Name:      "describe",
	Usage:     "show one object in detail, with its events, as kubectl describe",
	ArgsUsage: "RESOURCE NAME | RESOURCE/NAME [-n NS]",
	Description: `kubectl describe reads an object and the Events that name it (their
involvedObject), and prints both for a human. Events are objects too,
written by the components as they act on the object: the scheduler's
Scheduled or FailedScheduling, the kubelet's Pulling, Pulled, Created,
Started, BackOff, the controllers' SuccessfulCreate and ScalingReplicaSet.
They are the first place to look when a pod does not start.`,
	Flags: []cli.Flag{namespaceFlag()},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("podlab describe needs an object: podlab describe pod NAME")
		}
		res, names, err := resourceArgs(c.Args().Slice())
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return fmt.Errorf("podlab describe %s needs a name: podlab describe %s NAME (podlab get %s lists them)", res.Singular, res.Singular, res.Name)
		}
		s, err := openAPI(c, false)
		if err != nil {
			return err
		}
		defer s.Close()
		ns := namespaceOf(c)
		for i, name := range names {
			if i > 0 {
				fmt.Fprintln(c.App.Writer)
			}
			obj, err := s.client.Get(c.Context, res.Name, ns, name)
			if err != nil {
				return err
			}
			events, err := eventsFor(c, s, obj)
			if err != nil {
				return err
			}
			opts, err := describeOptions(c, s, obj)
			if err != nil {
				return err
			}
			if err := kubectl.Describe(c.App.Writer, obj, events, time.Now(), opts...); err != nil {
				return err
			}
		}
		return nil
	},
}

// eventsFor lists the events about obj. A user who may not list events
// (RBAC) still gets the object, without them.
func eventsFor(c *cli.Context, s *apiSession, obj apiserver.Object) ([]corev1.Event, error) {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = apiserver.DefaultNamespace // events about cluster-scoped objects, such as nodes
	}
	list, err := s.client.List(c.Context, "events", ns, apiserver.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, o := range list.Items {
		ev := o.(*corev1.Event)
		if ev.InvolvedObject.UID == obj.GetUID() || (ev.InvolvedObject.UID == "" && ev.InvolvedObject.Name == obj.GetName() && ev.InvolvedObject.Kind == obj.GetObjectKind().GroupVersionKind().Kind) {
			out = append(out, *ev)
		}
	}
	return out, nil
}

// describeOptions reads what kubectl describe shows besides the object: a
// Deployment's ReplicaSets, a ReplicaSet's pods, a Namespace's quotas and
// limit ranges. A user who may not list them gets the object without.
func describeOptions(c *cli.Context, s *apiSession, obj apiserver.Object) ([]kubectl.DescribeOption, error) {
	list := func(resource, ns string) ([]apiserver.Object, error) {
		l, err := s.client.List(c.Context, resource, ns, apiserver.ListOptions{})
		if apierrors.IsForbidden(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		items, err := list("replicasets", o.Namespace)
		if err != nil {
			return nil, err
		}
		var owned []*appsv1.ReplicaSet
		for _, it := range items {
			if rs := it.(*appsv1.ReplicaSet); metav1.IsControlledBy(rs, o) {
				owned = append(owned, rs)
			}
		}
		return []kubectl.DescribeOption{kubectl.WithReplicaSets(owned...)}, nil
	case *appsv1.ReplicaSet:
		items, err := list("pods", o.Namespace)
		if err != nil {
			return nil, err
		}
		var owned []*corev1.Pod
		for _, it := range items {
			if p := it.(*corev1.Pod); metav1.IsControlledBy(p, o) {
				owned = append(owned, p)
			}
		}
		return []kubectl.DescribeOption{kubectl.WithPods(owned...)}, nil
	case *corev1.Namespace:
		qs, err := list("resourcequotas", o.Name)
		if err != nil {
			return nil, err
		}
		lrs, err := list("limitranges", o.Name)
		if err != nil {
			return nil, err
		}
		var quotas []*corev1.ResourceQuota
		for _, q := range qs {
			quotas = append(quotas, q.(*corev1.ResourceQuota))
		}
		var ranges []*corev1.LimitRange
		for _, l := range lrs {
			ranges = append(ranges, l.(*corev1.LimitRange))
		}
		return []kubectl.DescribeOption{kubectl.WithResourceQuotas(quotas...), kubectl.WithLimitRanges(ranges...)}, nil
	}
	return nil, nil
}
