package printers

import (
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Cells computes an object's cells, one per column of Columns(kind), the
// way kube-apiserver's printers do (kubernetes/pkg/printers/internalversion,
// called with Wide set: the server computes every column and kubectl hides
// those of priority 1 unless -o wide). Cells are strings, except where kube
// returns numbers (a ReplicaSet's DESIRED, a Deployment's UP-TO-DATE, an
// Event's COUNT), which are int64. now is the time AGE counts from.
func Cells(obj apiserver.Object, now time.Time) ([]any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return podRow(o, now), nil
	case *corev1.Node:
		return nodeRow(o, now), nil
	case *corev1.Namespace:
		return []any{o.Name, string(o.Status.Phase), Age(o.CreationTimestamp, now)}, nil
	case *corev1.Event:
		return eventRow(o, now), nil
	case *appsv1.Deployment:
		return deploymentRow(o, now), nil
	case *appsv1.ReplicaSet:
		names, images := containerCells(o.Spec.Template.Spec.Containers)
		return []any{o.Name, int64(deref(o.Spec.Replicas)), int64(o.Status.Replicas),
			int64(o.Status.ReadyReplicas), Age(o.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(o.Spec.Selector)}, nil
	case *coordinationv1.Lease:
		holder := ""
		if o.Spec.HolderIdentity != nil {
			holder = *o.Spec.HolderIdentity
		}
		return []any{o.Name, holder, Age(o.CreationTimestamp, now)}, nil
	case *nodev1.RuntimeClass:
		return []any{o.Name, o.Handler, Age(o.CreationTimestamp, now)}, nil
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return []any{o.Name, int64(len(o.Webhooks)), Age(o.CreationTimestamp, now)}, nil
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return []any{o.Name, int64(len(o.Webhooks)), Age(o.CreationTimestamp, now)}, nil
	case *rbacv1.Role, *rbacv1.ClusterRole, *corev1.LimitRange:
		return []any{obj.GetName(), obj.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
	case *rbacv1.RoleBinding:
		return bindingRow(o.Name, o.RoleRef, o.Subjects, o.CreationTimestamp, now), nil
	case *rbacv1.ClusterRoleBinding:
		return bindingRow(o.Name, o.RoleRef, o.Subjects, o.CreationTimestamp, now), nil
	case *corev1.ResourceQuota:
		request, limit := quotaCells(o)
		return []any{o.Name, request, limit, Age(o.CreationTimestamp, now)}, nil
	}
	return nil, fmt.Errorf("no table row for %T", obj)
}

// Age is the AGE column: 5s, 3m2s, 45m, 3h20m, 2d3h, 100d.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// MicroAge is Age of a MicroTime (an event's eventTime).
func MicroAge(t metav1.MicroTime, now time.Time) string {
	return Age(metav1.Time{Time: t.Time}, now)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// PodStatus is the STATUS column of `kubectl get pods`: not a field of the
// pod but kubectl's summary of it. It starts from status.reason or the
// phase; a container that is waiting (ContainerCreating, ErrImagePull,
// ImagePullBackOff, CrashLoopBackOff) or terminated (Completed, Error,
// ExitCode:N, Signal:N) overrides it, an init container still running
// gives Init:N/M, and a pod with a deletionTimestamp is Terminating.
func PodStatus(pod *corev1.Pod) string {
	s, _, _, _, _ := podSummary(pod)
	return s
}

// podSummary is printPod's computation: the STATUS, the ready and total
// container counts, and the restarts with the time of the last one.
func podSummary(pod *corev1.Pod) (reason string, ready, total, restarts int, lastRestart time.Time) {
	total = len(pod.Spec.Containers)
	reason = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := map[string]bool{} // restartable init containers run for the pod's life
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			total++
		}
	}

	later := func(last *time.Time, s corev1.ContainerStatus) {
		if t := s.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(*last) {
			*last = t.FinishedAt.Time
		}
	}

	var sidecarRestarts int
	var lastSidecarRestart time.Time
	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		later(&lastRestart, c)
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			later(&lastSidecarRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			switch {
			case c.State.Terminated.Reason != "":
				reason = "Init:" + c.State.Terminated.Reason
			case c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || podCondition(pod, corev1.PodInitialized) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning := false
		// Backwards, so that the first container's state wins, as in kubectl.
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			later(&lastRestart, c)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// A pod with one container completed and another still running is
		// Running (or NotReady), not Completed.
		if reason == "Completed" && hasRunning {
			if podCondition(pod, corev1.PodReady) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost":
		reason = "Unknown"
	case pod.DeletionTimestamp != nil && !terminal:
		reason = "Terminating"
	}
	return reason, ready, total, restarts, lastRestart
}

// podCondition reports whether the pod's condition t is True.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podRow(pod *corev1.Pod, now time.Time) []any {
	reason, ready, total, restarts, last := podSummary(pod)
	restartCell := strconv.Itoa(restarts)
	if restarts != 0 && !last.IsZero() {
		restartCell = fmt.Sprintf("%d (%s ago)", restarts, duration.HumanDuration(now.Sub(last)))
	}
	ip := ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		trueGates := 0
		for _, g := range pod.Spec.ReadinessGates {
			if podCondition(pod, g.ConditionType) {
				trueGates++
			}
		}
		gates = fmt.Sprintf("%d/%d", trueGates, len(pod.Spec.ReadinessGates))
	}
	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartCell, Age(pod.CreationTimestamp, now),
		orNone(ip), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates}
}

func nodeRow(node *corev1.Node, now time.Time) []any {
	status := "Unknown"
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	address := func(t corev1.NodeAddressType) string {
		for _, a := range node.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	info := node.Status.NodeInfo
	return []any{node.Name, status, orNone(strings.Join(NodeRoles(node), ",")), Age(node.CreationTimestamp, now), info.KubeletVersion,
		address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		unknown(info.OSImage), unknown(info.KernelVersion), unknown(info.ContainerRuntimeVersion)}
}

// NodeRoles reads a node's roles from its node-role.kubernetes.io/<role>
// labels (and the older kubernetes.io/role=<role>), sorted.
func NodeRoles(node *corev1.Node) []string {
	seen := map[string]bool{}
	var roles []string
	for k, v := range node.Labels {
		role := ""
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			role = strings.TrimPrefix(k, "node-role.kubernetes.io/")
		case k == "kubernetes.io/role":
			role = v
		}
		if role != "" && !seen[role] {
			seen[role] = true
			roles = append(roles, role)
		}
	}
	sort.Strings(roles)
	return roles
}

func eventRow(e *corev1.Event, now time.Time) []any {
	first := Age(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = MicroAge(e.EventTime, now)
	}
	last := Age(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = MicroAge(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1 // a singleton event of the events.k8s.io API has no count
	}
	object := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		object += "/" + e.InvolvedObject.Name
	}
	component, host := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if host == "" {
		host = e.ReportingInstance
	}
	source := component
	if host != "" {
		source += ", " + host
	}
	return []any{last, e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message),
		first, int64(count), e.Name}
}

func deploymentRow(d *appsv1.Deployment, now time.Time) []any {
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = s.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref(d.Spec.Replicas)),
		int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp, now),
		names, images, selector}
}

// containerCells are the CONTAINERS and IMAGES cells of a pod template.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func bindingRow(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time, now time.Time) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []any{name, ref.Kind + "/" + ref.Name, Age(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// quotaCells are a ResourceQuota's REQUEST and LIMIT cells: "used/hard" of
// every resource in status.hard, sorted by name; limits.* go to LIMIT.
func quotaCells(q *corev1.ResourceQuota) (request, limit string) {
	names := make([]string, 0, len(q.Status.Hard))
	for n := range q.Status.Hard {
		names = append(names, string(n))
	}
	sort.Strings(names)
	var req, lim []string
	for _, n := range names {
		used := q.Status.Used[corev1.ResourceName(n)]
		hard := q.Status.Hard[corev1.ResourceName(n)]
		cell := fmt.Sprintf("%s: %s/%s", n, used.String(), hard.String())
		if strings.HasPrefix(n, "limits.") {
			lim = append(lim, cell)
		} else {
			req = append(req, cell)
		}
	}
	return strings.Join(req, ", "), strings.Join(lim, ", ")
}
