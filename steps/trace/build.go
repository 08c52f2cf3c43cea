package trace

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// builder gathers the rows of a timeline.
type builder struct {
	rows []row
	pods []PodSummary
}

// pod adds a pod's writes (its versions in the log, in order), the events
// about it, and its ReplicaSet's SuccessfulCreate and SuccessfulDelete
// about it. current is the pod as stored now (nil when deleted);
// compactedAt is the revision the store's history was compacted at (0: it
// was not), before which the log holds no write.
func (b *builder) pod(versions []apiserver.WatchEvent, current *corev1.Pod, evs []occurrence, compactedAt int64) {
	var known *corev1.Pod
	if len(versions) > 0 {
		known = versions[0].Object.(*corev1.Pod)
	}
	if current != nil {
		known = current
	}
	if known == nil {
		return
	}
	name, uid, object := known.Name, known.UID, "pod/"+known.Name
	owner := ""
	if ref := metav1.GetControllerOf(known); ref != nil && ref.Kind == "ReplicaSet" {
		owner = ref.Name
	}
	var rows []row
	var prev *corev1.Pod
	for _, we := range versions {
		p := we.Object.(*corev1.Pod)
		rev, _ := revisionOf(p.ResourceVersion)
		switch {
		case we.Type == apiserver.Added:
			rows = append(rows, createdRow(p, rev, owner))
		case we.Type == apiserver.Deleted:
			rows = append(rows, deletedRow(p, rev))
		case prev == nil:
			rows = append(rows, firstSeenRow(p, rev))
		default:
			if r, ok := changeRow(prev, p, rev); ok {
				rows = append(rows, r)
			}
		}
		prev = p
	}
	scheduled := false
	for _, o := range evs {
		scheduled = scheduled || (o.about("Pod", name, uid) && o.ev.Reason == ReasonScheduled)
	}
	if len(rows) == 0 || rows[0].Stage != StageCreated {
		// created before the compacted revision: what the pod as first
		// seen (or stored now) and the Events still tell
		first := known
		if len(versions) > 0 {
			first = versions[0].Object.(*corev1.Pod)
		}
		rows = append(compactedRows(known, first, len(versions) == 0, owner, compactedAt, scheduled), rows...)
	}
	var deleteRow *row
	for _, o := range evs {
		switch {
		case o.about("Pod", name, uid):
			rows = append(rows, o.row(object))
		case owner != "" && o.about("ReplicaSet", owner, "") && o.ev.Message == "Created pod: "+name:
			rows = append(rows, o.row("replicaset/"+owner))
		case owner != "" && o.about("ReplicaSet", owner, "") && o.ev.Message == "Deleted pod: "+name:
			r := o.row("replicaset/" + owner)
			rows = append(rows, r)
			deleteRow = &r
		}
	}
	if deleteRow != nil {
		// the ReplicaSet scaled down: its controller asked for the delete
		for i := range rows {
			r := &rows[i]
			if r.Resource == "pods" && (r.Stage == StageDeleteRequested || (r.Stage == StageDeleted && r.Actor == User)) {
				r.Actor, r.by = ControllerManager, deleteRow.by
				r.Detail += fmt.Sprintf(", asked by the replicaset-controller scaling down ReplicaSet %s", owner)
				break
			}
		}
	}
	b.rows = append(b.rows, rows...)
	sum := PodSummary{Name: name, UID: uid, Node: known.Spec.NodeName}
	if prev != nil && prev.Spec.NodeName != "" {
		sum.Node = prev.Spec.NodeName
	}
	b.pods = append(b.pods, sum)
}

// createdRow is the API server's create.
func createdRow(p *corev1.Pod, rev int64, owner string) row {
	r := row{Entry: Entry{Revision: rev, Resource: "pods", Component: "kube-apiserver", Stage: StageCreated,
		Object: "pod/" + p.Name}, clock: second(p.CreationTimestamp.Time)}
	where := "no node yet"
	if p.Spec.NodeName != "" {
		where = "spec.nodeName " + p.Spec.NodeName + " already: no scheduler involved"
	}
	key := "/registry/pods/" + p.Namespace + "/" + p.Name
	if owner != "" {
		r.Actor, r.by = ControllerManager, "replicaset-controller"
		r.Detail = fmt.Sprintf("stored %s (%s), asked by the replicaset-controller (system:kube-controller-manager) for ReplicaSet %s", key, where, owner)
	} else {
		r.Actor, r.by = User, "user"
		r.Detail = fmt.Sprintf("stored %s (%s), asked by a user the object does not name (kube-apiserver's audit log would)", key, where)
	}
	return r
}

// compactedRows stand for the writes of a pod created before the store's
// history was compacted (at revision at): its creation, from its
// creationTimestamp; its binding, when first (the first version the log
// holds, or the pod stored now when the log holds none) is on a node, from
// its PodScheduled condition; its Running, when first is Running, from
// its containers' start (only when the log holds no write of it: else the
// log's first write says it). None concludes from the pod as it is now
// what happened before: a pod on a node now may have been bound by the
// scheduler (a Scheduled event says so) or created on it.
func compactedRows(known, first *corev1.Pod, noWrites bool, owner string, at int64, scheduled bool) []row {
	history := "the store's history was compacted"
	lost := "before the compacted revision"
	if at > 0 {
		history = fmt.Sprintf("the store's history before revision %d was compacted", at)
		lost = fmt.Sprintf("before revision %d, compacted", at)
	}
	key := "/registry/pods/" + known.Namespace + "/" + known.Name
	created := row{Entry: Entry{Resource: "pods", Component: "kube-apiserver", Stage: StageCreated, Object: "pod/" + known.Name},
		clock: second(known.CreationTimestamp.Time)}
	created.Actor, created.by = User, "user"
	asked := "asked by a user the object does not name (kube-apiserver's audit log would)"
	if owner != "" {
		created.Actor, created.by = ControllerManager, "replicaset-controller"
		asked = "asked by the replicaset-controller (system:kube-controller-manager) for ReplicaSet " + owner
	}
	created.Detail = fmt.Sprintf("stored %s at its creationTimestamp, %s; %s: the pod's creation and binding are not in it", key, asked, history)
	rows := []row{created}
	if first.Spec.NodeName != "" {
		bound := row{Entry: Entry{Resource: "pods", Stage: StageBound, Object: "pod/" + known.Name},
			clock: second(conditionTime(first, corev1.PodScheduled))}
		how := "bound by the scheduler (its Scheduled event says so)"
		bound.Component, bound.Actor = first.Spec.SchedulerName, Scheduler
		if bound.Component == "" {
			bound.Component = corev1.DefaultSchedulerName
		}
		if !scheduled {
			how = "by the scheduler or created on it: no Scheduled event is left to say which"
			bound.Component, bound.Actor = "kube-apiserver", User
		}
		bound.by = bound.Component
		bound.Detail = fmt.Sprintf("spec.nodeName=%s, %s; the write is %s (the time is its condition PodScheduled's)", first.Spec.NodeName, how, lost)
		rows = append(rows, bound)
	}
	if noWrites && first.Status.Phase == corev1.PodRunning {
		running := statusRowBase(first, 0)
		running.Stage = StageRunning
		running.clock = second(startedAt(first))
		running.Detail = fmt.Sprintf("phase Running (the pod as stored now: status.startTime %s, containers started %s); the kubelet's write is %s",
			timeString(first.Status.StartTime), timeString(ptrTime(startedAt(first))), lost)
		rows = append(rows, running)
	}
	return rows
}

// conditionTime is when the pod's condition t last changed (zero: none).
func conditionTime(p *corev1.Pod, t corev1.PodConditionType) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// startedAt is when the last of the pod's running containers started, or
// else when it became Ready (zero: neither is known).
func startedAt(p *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil && cs.State.Running.StartedAt.After(t) {
			t = cs.State.Running.StartedAt.Time
		}
	}
	if t.IsZero() && conditionTrue(p, corev1.PodReady) {
		t = conditionTime(p, corev1.PodReady)
	}
	return t
}

func ptrTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

func timeString(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// deletedRow is the write that removed the pod: the watch log's DELETED,
// with the pod's last value.
func deletedRow(p *corev1.Pod, rev int64) row {
	r := row{Entry: Entry{Revision: rev, Resource: "pods", Stage: StageDeleted, Object: "pod/" + p.Name}}
	key := "/registry/pods/" + p.Namespace + "/" + p.Name
	switch {
	case p.DeletionTimestamp != nil && p.Spec.NodeName != "":
		r.Component, r.Actor = "kubelet/"+p.Spec.NodeName, Kubelet
		r.Detail = fmt.Sprintf("%s removed: the kubelet deletes the pod with grace period 0 once its containers stopped", key)
	case p.Spec.NodeName == "":
		r.Component, r.Actor = "kube-apiserver", User
		r.Detail = fmt.Sprintf("%s removed at once: no node ran the pod", key)
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		r.Component, r.Actor = "kube-apiserver", User
		r.Detail = fmt.Sprintf("%s removed at once: the pod had finished (%s)", key, p.Status.Phase)
	default:
		r.Component, r.Actor = "kube-apiserver", User
		r.Detail = fmt.Sprintf("%s removed at once: grace period 0 (a forced delete), the kubelet of %s was not waited for", key, p.Spec.NodeName)
	}
	r.by = r.Component
	if r.Actor == User {
		r.by = "user"
	}
	return r
}

// firstSeenRow is the first write a compacted log holds of a pod created
// before it: no earlier version to compare with.
func firstSeenRow(p *corev1.Pod, rev int64) row {
	r := statusRowBase(p, rev)
	r.Stage = StageStatus
	r.Detail = "first write the compacted log holds: phase " + string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		r.Detail += ", " + cs.Name + ": " + stateString(cs.State)
	}
	if p.Status.Phase == corev1.PodRunning {
		// Running by this write at the latest: the write that made it so is
		// this one or one the compaction removed
		r.Stage = StageRunning
		r.Detail += " (Running by this write at the latest: the write before it was compacted)"
	}
	return r
}

// statusRowBase is a status write of p: the kubelet's, once the pod is on
// a node.
func statusRowBase(p *corev1.Pod, rev int64) row {
	r := row{Entry: Entry{Revision: rev, Resource: "pods", Object: "pod/" + p.Name}}
	if p.Spec.NodeName != "" {
		r.Component, r.Actor = "kubelet/"+p.Spec.NodeName, Kubelet
	} else {
		r.Component, r.Actor = "kube-apiserver", User
	}
	r.by = r.Component
	return r
}

// changeRow names the stage a MODIFIED write of a pod was, by comparing
// it with the version before.
func changeRow(prev, cur *corev1.Pod, rev int64) (row, bool) {
	key := "/registry/pods/" + cur.Namespace + "/" + cur.Name
	switch {
	case prev.Spec.NodeName == "" && cur.Spec.NodeName != "":
		sched := cur.Spec.SchedulerName
		if sched == "" {
			sched = corev1.DefaultSchedulerName
		}
		return row{Entry: Entry{Revision: rev, Resource: "pods", Component: sched, Actor: Scheduler, Stage: StageBound, Object: "pod/" + cur.Name,
			Detail: fmt.Sprintf("spec.nodeName=%s and condition PodScheduled=True (the pods/binding subresource): the kubelet of %s sees the pod", cur.Spec.NodeName, cur.Spec.NodeName)},
			clock: newestChange(prev, cur), by: sched}, true

	case prev.DeletionTimestamp == nil && cur.DeletionTimestamp != nil:
		grace := int64(0)
		if cur.DeletionGracePeriodSeconds != nil {
			grace = *cur.DeletionGracePeriodSeconds
		}
		asked := cur.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
		return row{Entry: Entry{Revision: rev, Resource: "pods", Component: "kube-apiserver", Actor: User, Stage: StageDeleteRequested, Object: "pod/" + cur.Name,
			Detail: fmt.Sprintf("deletionTimestamp %s (grace period %ds) on %s: the kubelet of %s stops the containers, then deletes the pod",
				cur.DeletionTimestamp.UTC().Format(time.RFC3339), grace, key, cur.Spec.NodeName)},
			clock: second(asked), by: "user"}, true

	case !equalJSON(prev.Status, cur.Status):
		r := statusRowBase(cur, rev)
		r.clock = newestChange(prev, cur)
		var long, short []string
		for _, c := range statusChanges(prev, cur) {
			long, short = append(long, c.long), append(short, c.short)
		}
		if len(long) == 0 {
			long = []string{"changed: " + strings.Join(changedFields(prev.Status, cur.Status), ", ")}
			short = long
		}
		r.Detail, r.Short = strings.Join(long, ", "), strings.Join(short, ", ")
		r.Stage = StageStatus
		switch {
		case cur.Status.Phase == corev1.PodRunning && prev.Status.Phase != corev1.PodRunning:
			r.Stage = StageRunning
		case cur.Status.Phase != prev.Status.Phase && (cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed):
			r.Stage = string(cur.Status.Phase)
		case conditionTrue(cur, corev1.PodReadyToStartContainers) && !conditionTrue(prev, corev1.PodReadyToStartContainers):
			r.Stage = StageSandbox
			r.Detail = "RunPodSandbox done (the pod's namespaces exist): " + r.Detail
		case cur.Spec.NodeName == "" && conditionStatus(cur, corev1.PodScheduled) == corev1.ConditionFalse:
			r.Stage, r.Component, r.Actor = StageUnschedulable, corev1.DefaultSchedulerName, Scheduler
			r.by = r.Component
			r.Detail = "condition PodScheduled=False: " + conditionMessage(cur, corev1.PodScheduled)
			r.Short = "PodScheduled=False"
		}
		return r, true

	case !equalJSON(prev.ObjectMeta.OwnerReferences, cur.ObjectMeta.OwnerReferences) ||
		!equalJSON(prev.Labels, cur.Labels) || !equalJSON(prev.Annotations, cur.Annotations) ||
		!equalJSON(prev.Finalizers, cur.Finalizers) || !equalJSON(prev.Spec, cur.Spec):
		var what []string
		for _, c := range []struct {
			name string
			a, b any
		}{
			{"labels", prev.Labels, cur.Labels}, {"annotations", prev.Annotations, cur.Annotations},
			{"ownerReferences", prev.OwnerReferences, cur.OwnerReferences}, {"finalizers", prev.Finalizers, cur.Finalizers},
			{"spec", prev.Spec, cur.Spec},
		} {
			if !equalJSON(c.a, c.b) {
				what = append(what, c.name)
			}
		}
		return row{Entry: Entry{Revision: rev, Resource: "pods", Component: "kube-apiserver", Actor: User, Stage: StageUpdated, Object: "pod/" + cur.Name,
			Detail: "changed: " + strings.Join(what, ", ")}, by: "user"}, true
	}
	return row{}, false
}

// change is one thing a status write changed: in words, and in a few
// (for a diagram's arrow).
type change struct{ long, short string }

// statusChanges lists what a status write changed.
func statusChanges(prev, cur *corev1.Pod) []change {
	var out []change
	add := func(short, long string, args ...any) {
		out = append(out, change{long: fmt.Sprintf(long, args...), short: short})
	}
	if prev.Status.Phase != cur.Status.Phase {
		short := "phase " + string(cur.Status.Phase)
		if prev.Status.Phase == "" {
			add(short, "phase %s", cur.Status.Phase)
		} else {
			add(short, "phase %s -> %s", prev.Status.Phase, cur.Status.Phase)
		}
	}
	for _, c := range cur.Status.Conditions {
		if conditionStatus(prev, c.Type) != c.Status {
			add(fmt.Sprintf("%s=%s", c.Type, c.Status), "%s=%s", c.Type, c.Status)
		}
	}
	if cur.Status.PodIP != prev.Status.PodIP && cur.Status.PodIP != "" {
		add("podIP", "podIP %s", cur.Status.PodIP)
	}
	for _, cs := range cur.Status.ContainerStatuses {
		var old *corev1.ContainerStatus
		for i := range prev.Status.ContainerStatuses {
			if prev.Status.ContainerStatuses[i].Name == cs.Name {
				old = &prev.Status.ContainerStatuses[i]
			}
		}
		st := stateString(cs.State)
		short := cs.Name + " " + strings.Fields(st)[0]
		switch {
		case old == nil:
			add(short, "%s: %s", cs.Name, st)
		case stateString(old.State) != st:
			add(short, "%s: %s -> %s", cs.Name, stateString(old.State), st)
		}
		if cs.ContainerID != "" && (old == nil || old.ContainerID != cs.ContainerID) {
			add(cs.Name+" containerID", "%s: containerID %s", cs.Name, cs.ContainerID)
		}
		if cs.ImageID != "" && (old == nil || old.ImageID != cs.ImageID) {
			add(cs.Name+" imageID", "%s: imageID %s", cs.Name, shortID(cs.ImageID))
		}
		if old != nil && cs.RestartCount != old.RestartCount {
			add(fmt.Sprintf("%s restartCount %d", cs.Name, cs.RestartCount), "%s: restartCount %d", cs.Name, cs.RestartCount)
		}
	}
	return out
}

// stateString is a container state as kubectl describe names it.
func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit code %d)", s.Terminated.Reason, s.Terminated.ExitCode)
	case s.Waiting != nil && s.Waiting.Reason != "":
		return "waiting (" + s.Waiting.Reason + ")"
	case s.Waiting != nil:
		return "waiting"
	}
	return "no state"
}

// shortID shortens repository@sha256:<64 hex> to 12 hex digits.
func shortID(id string) string {
	if i := strings.Index(id, "sha256:"); i >= 0 && len(id) > i+7+12 {
		return id[:i+7+12]
	}
	return id
}

// newestChange is the second of the newest timestamp cur's status gained
// over prev's: a condition's lastTransitionTime, startTime, a container's
// startedAt or finishedAt. The write came within that second: the kubelet
// and the scheduler read the clock just before they write.
func newestChange(prev, cur *corev1.Pod) clock {
	var newest time.Time
	see := func(t *metav1.Time, old *metav1.Time) {
		if t == nil || t.IsZero() || (old != nil && old.Equal(t)) {
			return
		}
		if t.After(newest) {
			newest = t.Time
		}
	}
	for _, c := range cur.Status.Conditions {
		var old *metav1.Time
		for _, o := range prev.Status.Conditions {
			if o.Type == c.Type {
				old = &o.LastTransitionTime
			}
		}
		see(&c.LastTransitionTime, old)
	}
	see(cur.Status.StartTime, prev.Status.StartTime)
	for _, cs := range cur.Status.ContainerStatuses {
		var old corev1.ContainerState
		for _, o := range prev.Status.ContainerStatuses {
			if o.Name == cs.Name {
				old = o.State
			}
		}
		if cs.State.Running != nil {
			var o *metav1.Time
			if old.Running != nil {
				o = &old.Running.StartedAt
			}
			see(&cs.State.Running.StartedAt, o)
		}
		if cs.State.Terminated != nil {
			var o *metav1.Time
			if old.Terminated != nil {
				o = &old.Terminated.FinishedAt
			}
			see(&cs.State.Terminated.FinishedAt, o)
		}
	}
	return second(newest)
}

func conditionStatus(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func conditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	return conditionStatus(p, t) == corev1.ConditionTrue
}

func conditionMessage(p *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// timeline orders the rows, places them in time, and makes the Timeline.
// logs are the logs read: the timeline is complete after the latest
// revision any of them starts after.
func (b *builder) timeline(kind, namespace, name string, uid types.UID, upTo int64, logs ...*watchLog) *Timeline {
	tl := &Timeline{Kind: kind, Namespace: namespace, Name: name, UID: uid, Revision: upTo, CompleteAfter: 1}
	for _, l := range logs {
		tl.CompleteAfter = max(tl.CompleteAfter, l.after)
		tl.Compacted = tl.Compacted || l.compacted
	}
	rows := orderRows(b.rows)
	place(rows)
	if len(rows) > 0 {
		tl.Start = rows[0].Time
		for _, r := range rows {
			if r.Stage == StageCreated && r.Resource != "events" {
				tl.Start = r.Time
				break
			}
		}
	}
	for _, r := range rows {
		e := r.Entry
		e.T = e.Time.Sub(tl.Start)
		tl.Entries = append(tl.Entries, e)
	}
	tl.Pods = b.pods
	return tl
}

// fill points each pod summary at its entries.
func (tl *Timeline) fill() {
	for i := range tl.Pods {
		p := &tl.Pods[i]
		for j := range tl.Entries {
			e := &tl.Entries[j]
			if e.Object != "pod/"+p.Name || e.Resource != "pods" {
				continue
			}
			switch {
			case e.Stage == StageCreated && p.Created == nil:
				p.Created = e
			case e.Stage == StageRunning && p.Running == nil:
				p.Running = e
			case e.Stage == StageDeleted:
				p.Deleted = e
			}
		}
	}
}

// orderRows sorts rows by revision. Rows whose revision the compacted log
// lost (0) were written before the compacted revision, so before all the
// others: they go first, in the order of their times.
func orderRows(in []row) []row {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b row) int {
		if a.Revision == 0 && b.Revision == 0 {
			return a.clock.t.Compare(b.clock.t)
		}
		return cmp.Compare(a.Revision, b.Revision)
	})
	return out
}

// spanDefs are the stretches of a pod's chain worth a name.
func spanDefs() []Span {
	return []Span{
		{Name: "waiting for a node (scheduling)", From: StageCreated, To: StageBound},
		{Name: "sandbox (RunPodSandbox)", From: StageBound, To: StageSandbox},
		{Name: "image pull", From: ReasonPulling, To: ReasonPulled},
		{Name: "unpack, spec, runc create", From: ReasonPulled, To: ReasonCreated},
		{Name: "runc start", From: ReasonCreated, To: ReasonStarted},
		{Name: "status Running reported", From: ReasonStarted, To: StageRunning},
		{Name: "graceful stop", From: StageDeleteRequested, To: StageDeleted},
	}
}

// spans measures spanDefs on a pod's entries.
func spans(entries []Entry) []Span {
	var out []Span
	for _, d := range spanDefs() {
		from := slices.IndexFunc(entries, func(e Entry) bool { return e.Stage == d.From })
		if from < 0 {
			continue
		}
		to := slices.IndexFunc(entries[from:], func(e Entry) bool { return e.Stage == d.To })
		if to < 0 {
			continue
		}
		a, b := entries[from], entries[from+to]
		d.Took, d.Estimated = b.Time.Sub(a.Time), a.Estimated || b.Estimated
		out = append(out, d)
	}
	return out
}

// equalJSON compares two values as the store would: by their JSON.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// changedFields names the top-level fields of two statuses that differ:
// what statusChanges has no words for.
func changedFields(a, b corev1.PodStatus) []string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		return []string{"status"}
	}
	var out []string
	for k := range mb {
		if !equalJSON(ma[k], mb[k]) {
			out = append(out, k)
		}
	}
	for k := range ma {
		if _, ok := mb[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
