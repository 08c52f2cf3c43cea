package admission

import (
	"fmt"
	"github.com/podlab/podlab/internal/qos"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// LimitRanger: a LimitRange is a namespace administrator's rules for the
// resources of each container (type Container) or each pod (type Pod):
// defaults for containers that say nothing, and min, max and a maximum
// limit/request ratio that nobody may exceed. kube-apiserver's LimitRanger
// plugin is both mutating (it fills the defaults in) and validating (it
// enforces the bounds), and runs in both admission phases.

// limitRangerAnnotation records on the pod what LimitRanger filled in.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// LimitRanger runs LimitRangerMutate then LimitRangerValidate, for callers
// that do not separate the two admission phases.
func LimitRanger(p *corev1.Pod, ranges []corev1.LimitRange) ([]string, error) {
	notes := LimitRangerMutate(p, ranges)
	more, err := LimitRangerValidate(p, ranges)
	return append(notes, more...), err
}

// LimitRangerMutate is LimitRanger's mutating half: every container (and
// init container) gets each Container-type LimitRange's default limits and
// default requests for the resources it does not set, then a request equal
// to its limit where it has a limit and still no request. The earlier
// LimitRange wins when two set the same default. What was set is recorded
// in the pod's kubernetes.io/limit-ranger annotation, and the pod's
// status.qosClass, if already computed, is computed again.
func LimitRangerMutate(p *corev1.Pod, ranges []corev1.LimitRange) []string {
	var notes, annotations []string
	for i := range ranges {
		lr := effectiveLimitRange(&ranges[i])
		limits, requests := containerDefaults(lr)
		if len(limits) == 0 && len(requests) == 0 {
			continue
		}
		for j := range p.Spec.Containers {
			n, a := mergeDefaults(&p.Spec.Containers[j], "container", lr.Name, limits, requests)
			notes, annotations = append(notes, n...), append(annotations, a...)
		}
		for j := range p.Spec.InitContainers {
			n, a := mergeDefaults(&p.Spec.InitContainers[j], "init container", lr.Name, limits, requests)
			notes, annotations = append(notes, n...), append(annotations, a...)
		}
	}
	// Pod defaulting's rule (requests from limits) for limits set just now.
	d := &defaulter{}
	for i := range p.Spec.Containers {
		d.requestsFromLimits(&p.Spec.Containers[i], fmt.Sprintf("spec.containers[%d]", i))
	}
	for i := range p.Spec.InitContainers {
		d.requestsFromLimits(&p.Spec.InitContainers[i], fmt.Sprintf("spec.initContainers[%d]", i))
	}
	notes = append(notes, d.notes...)
	if len(annotations) > 0 {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(annotations, "; ")
		notes = append(notes, "set annotation "+limitRangerAnnotation)
	}
	if p.Status.QOSClass != "" && len(notes) > 0 {
		if class := qos.Compute(p); class != p.Status.QOSClass {
			p.Status.QOSClass = class
			notes = append(notes, fmt.Sprintf("set status.qosClass=%s (resources changed)", class))
		}
	}
	return notes
}

// LimitRangerValidate is LimitRanger's validating half: each container
// against each Container item's min, max and maxLimitRequestRatio, and the
// pod's totals against each Pod item's. All violations are reported in one
// 403 Forbidden error with kube-apiserver's texts, e.g.
//
//	pods "web" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi
func LimitRangerValidate(p *corev1.Pod, ranges []corev1.LimitRange) ([]string, error) {
	var notes []string
	for i := range ranges {
		lr := effectiveLimitRange(&ranges[i])
		var errs []error
		for _, item := range lr.Spec.Limits {
			switch item.Type {
			case corev1.LimitTypeContainer:
				for _, c := range p.Spec.Containers {
					errs = append(errs, checkItem(item, c.Resources.Requests, c.Resources.Limits)...)
				}
				for _, c := range p.Spec.InitContainers {
					errs = append(errs, checkItem(item, c.Resources.Requests, c.Resources.Limits)...)
				}
			case corev1.LimitTypePod:
				errs = append(errs, checkItem(item, PodRequests(p), PodLimits(p))...)
			}
		}
		if len(errs) > 0 {
			return notes, apierrors.NewForbidden(podsResource, p.Name, utilerrors.NewAggregate(errs))
		}
		notes = append(notes, fmt.Sprintf("LimitRange %q: pod is within %s", lr.Name, describeBounds(lr)))
	}
	return notes, nil
}

// effectiveLimitRange returns lr with its LimitRangeItem defaults applied
// (DefaultLimitRange), leaving the caller's object untouched.
func effectiveLimitRange(lr *corev1.LimitRange) *corev1.LimitRange {
	out := lr.DeepCopy()
	DefaultLimitRange(out)
	return out
}

// containerDefaults merges the default limits and default requests of the
// Container items of lr.
func containerDefaults(lr *corev1.LimitRange) (limits, requests corev1.ResourceList) {
	limits, requests = corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
	}
	return limits, requests
}

// mergeDefaults sets the defaults a container lacks and returns the notes
// and the annotation parts ("cpu, memory request for container web").
func mergeDefaults(c *corev1.Container, what, lrName string, limits, requests corev1.ResourceList) (notes, annotations []string) {
	var setLimits, setRequests []string
	for _, name := range sortedNames(limits) {
		if _, ok := c.Resources.Limits[name]; ok {
			continue
		}
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		q := limits[name]
		c.Resources.Limits[name] = q.DeepCopy()
		setLimits = append(setLimits, string(name))
		notes = append(notes, fmt.Sprintf("LimitRange %q: set %s %q limits.%s=%s (default)", lrName, what, c.Name, name, q.String()))
	}
	for _, name := range sortedNames(requests) {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		q := requests[name]
		c.Resources.Requests[name] = q.DeepCopy()
		setRequests = append(setRequests, string(name))
		notes = append(notes, fmt.Sprintf("LimitRange %q: set %s %q requests.%s=%s (defaultRequest)", lrName, what, c.Name, name, q.String()))
	}
	if len(setRequests) > 0 {
		annotations = append(annotations, strings.Join(setRequests, ", ")+" request for "+what+" "+c.Name)
	}
	if len(setLimits) > 0 {
		annotations = append(annotations, strings.Join(setLimits, ", ")+" limit for "+what+" "+c.Name)
	}
	return notes, annotations
}

// checkItem checks one requests/limits pair against one LimitRange item.
func checkItem(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	var errs []error
	t := string(item.Type)
	for _, name := range sortedNames(item.Min) {
		if err := minConstraint(t, string(name), item.Min[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedNames(item.Max) {
		if err := maxConstraint(t, string(name), item.Max[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		if err := ratioConstraint(t, string(name), item.MaxLimitRequestRatio[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// atOnePrecision returns the three values at one precision: milli-units when
// none overflows, whole units otherwise.
func atOnePrecision(request, limit, enforced resource.Quantity) (int64, int64, int64) {
	r, l, e := request.Value(), limit.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		return request.MilliValue(), limit.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := atOnePrecision(req, lim, enforced)
	if !hasReq {
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String())
	}
	if r < e {
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	if hasLim && l < e {
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	return nil
}

func maxConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := atOnePrecision(req, lim, enforced)
	if !hasLim {
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, limitType, enforced.String())
	}
	if l > e {
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	if hasReq && r > e {
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, _ := atOnePrecision(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, limitType, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, limitType, enforced.String())
	}
	ratio := float64(l) / float64(r)
	observed, allowed := ratio, float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed, allowed = ratio*1000, float64(enforced.MilliValue())
	}
	if observed > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, limitType, enforced.String(), ratio)
	}
	return nil
}

// describeBounds summarizes a LimitRange's bounds for a note:
// "Container min cpu=100m, Container max memory=1Gi".
func describeBounds(lr *corev1.LimitRange) string {
	var parts []string
	for _, item := range lr.Spec.Limits {
		for _, b := range []struct {
			what string
			list corev1.ResourceList
		}{{"min", item.Min}, {"max", item.Max}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}} {
			for _, name := range sortedNames(b.list) {
				q := b.list[name]
				parts = append(parts, fmt.Sprintf("%s %s %s=%s", item.Type, b.what, name, q.String()))
			}
		}
	}
	if len(parts) == 0 {
		return "its bounds (it sets none)"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
