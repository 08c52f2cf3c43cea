package up

// Steps 4 to 16 of a bare pod (6 to 18 of a Deployment): the scheduler, then
// the node's kubelet, stage by stage, down to runc, and the status back.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/scheduler"
)

const (
	compScheduler = "kube-scheduler (as system:kube-scheduler)"
	compBinding   = "kube-scheduler → kube-apiserver (the pods/binding subresource)"
)

// chain runs the bare pod's steps 4 to 16 for pod, as stored at its
// creation.
func (u *upRun) chain(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	createdRV := pod.ResourceVersion

	// Step 4: the scheduler's cycle.
	d, err := u.decisions.wait(ctx, key, u.o.Timeout)
	if err != nil {
		return u.failed(4, compScheduler, nil, err)
	}
	r := d.Result
	did := []string{
		fmt.Sprintf("its pod informer's watch delivered pod %s with no spec.nodeName (schedulerName %s): into the scheduling queue", key, scheduler.SchedulerName),
		fmt.Sprintf("scheduling cycle, attempt %d: the pod requests %s", d.Attempt, requests(r)),
	}
	did = append(did, tableLines(r)...)
	if d.Unschedulable() {
		did = append(did, "no node fits: "+d.Err.Error())
		return u.failed(4, compScheduler, did,
			fmt.Errorf("%w: %v (podlab describe pod %s, podlab get nodes)", ErrUnschedulable, d.Err, pod.Name))
	}
	did = append(did, fmt.Sprintf("chose node %s: %s", r.Node, howChosen(r)))
	u.podStep(4, compScheduler, d, did...)

	// Step 5: the binding.
	did = []string{fmt.Sprintf("POST /api/v1/namespaces/%s/pods/%s/binding as system:kube-scheduler: a Binding to Node %s", pod.Namespace, pod.Name, r.Node)}
	if d.Err != nil && !d.Conflict {
		return u.failed(5, compBinding, did, d.Err)
	}
	obj, err := u.admin.Get(ctx, "pods", pod.Namespace, pod.Name)
	if err != nil {
		return u.failed(5, compBinding, did, err)
	}
	bound := obj.(*corev1.Pod)
	node := bound.Spec.NodeName
	if d.Conflict {
		did = append(did, fmt.Sprintf("someone else bound it first (%v): it is on node %s", d.Err, node))
	}
	did = append(did,
		fmt.Sprintf("the API server set spec.nodeName=%s and the condition PodScheduled=True: %s stored at revision %s", node, keyOf("pods", bound), bound.ResourceVersion),
		fmt.Sprintf("event Scheduled: Successfully assigned %s to %s", key, node))
	u.podStep(5, compBinding, bound, did...)

	// Step 6: the node's kubelet sees it through its watch.
	k, err := u.kubeletFor(ctx, node)
	if err != nil {
		return u.failed(6, "kubelet of "+node, nil, err)
	}
	compKubelet := fmt.Sprintf("kubelet of %s (as system:node:%s)", node, node)
	sel := "spec.nodeName=" + node
	did = []string{fmt.Sprintf("WATCH /api/v1/pods?fieldSelector=%s&resourceVersion=%s (from the pod's creation: nothing since is missed)", sel, createdRV)}
	ev, err := u.waitEvent(ctx, u.clients[node], "pods", "", apiserver.ListOptions{FieldSelector: sel, ResourceVersion: createdRV},
		"pod "+key+" on node "+node, func(ev apiserver.WatchEvent) bool {
			return ev.Type == apiserver.Added && ev.Object.GetUID() == pod.UID
		})
	if err != nil {
		return u.failed(6, compKubelet, did, err)
	}
	pod = ev.Object.(*corev1.Pod)
	u.res.Node = node
	u.podStep(6, compKubelet, pod, append(did,
		fmt.Sprintf("event ADDED pod %s at revision %s: the binding made it match the field selector (a change that starts matching is ADDED)", key, pod.ResourceVersion))...)

	return u.runPod(ctx, k, pod, compKubelet)
}

// requests is what the pod asks for, as the scheduler counts it.
func requests(r scheduler.Result) string {
	req := r.Requests.String()
	if req == "" {
		req = "nothing"
	}
	if s := r.ScoringRequests.String(); s != r.Requests.String() {
		req += " (the scores count " + s + " for containers that state nothing)"
	}
	return req
}

func howChosen(r scheduler.Result) string {
	if !r.Scored {
		return "the only node that passed every filter, so nothing to score"
	}
	var total int64
	for _, n := range r.Nodes {
		if n.Name == r.Node {
			total = n.Total
		}
	}
	how := fmt.Sprintf("the highest TOTAL, %d", total)
	if r.Ties > 1 {
		how += fmt.Sprintf(", shared by %d nodes: drawn at random", r.Ties)
	}
	return how
}

// status is what one stage's status report wrote.
type status struct {
	stage string
	rec   kubelet.Recording
}

// runPod is steps 7 to 16: the kubelet's stages, the runtime and runc, the
// status back.
func (u *upRun) runPod(ctx context.Context, k *kubelet.Kubelet, pod *corev1.Pod, compKubelet string) error {
	ns, name := pod.Namespace, pod.Name
	fresh := func() (*corev1.Pod, error) { return k.Pod(ctx, ns, name) }
	var reports []status

	// Step 7: syncPod begins.
	st, err := k.Observe(ctx, pod)
	if err != nil {
		return u.failed(7, compKubelet+": syncPod", nil, err)
	}
	ctr := pod.Spec.Containers[0]
	cs := st.Container(ctr.Name)
	u.res.Container = ctr.Name
	next := kubelet.NextStage(pod, st)
	podCgroup, err := k.Layout().PodCgroupPath(pod)
	if err != nil {
		return u.failed(7, compKubelet+": syncPod", nil, err)
	}
	did := []string{
		fmt.Sprintf("syncPod %s/%s (uid %s): the pod's runtime files go under %s", ns, name, pod.UID, k.Layout().Dir),
		fmt.Sprintf("it asked its runtime over CRI (ListPodSandbox, ListContainers, ImageStatus): %s; image %s %s (imagePullPolicy %s); %s",
			sandboxState(st), cs.Ref, presence(cs.Present), cs.Policy, runsState(cs)),
		fmt.Sprintf("next: %s (%s): %s", next.Name, next.Name.CRI(), next.Why),
		fmt.Sprintf("then, for container %s: pull, create, start; its cgroup will be under %s (QoS class %s)", ctr.Name, podCgroup, pod.Status.QOSClass),
	}
	if len(pod.Spec.Containers) > 1 {
		did = append(did, fmt.Sprintf("(podlab up follows the first of its %d containers)", len(pod.Spec.Containers)))
	}
	u.podStep(7, compKubelet+": syncPod", st, did...)

	// Steps 8 to 13: the kubelet's own syncPod, the same sync loop as
	// podlab kubelet's, each stage it runs rendered as podlab kubelet
	// renders it (kubelet.WriteReport), with what podlab up reads back from
	// the kernel between runc create and runc start.
	if pod, err = fresh(); err != nil {
		return u.failed(8, compKubelet+": syncPod", nil, err)
	}
	sp := &syncedPod{u: u, ctr: ctr.Name}
	if u.reg != nil {
		_, sp.regOffset = u.reg.requests(0)
	}
	u.setOnStage(sp.onStage)
	err = k.SyncPod(ctx, pod)
	u.setOnStage(nil)
	if sp.err != nil {
		return sp.err
	}
	if err != nil {
		return u.failed(sp.next(), compKubelet+": syncPod", nil, err)
	}
	sr, cr, str := sp.sandbox, sp.create, sp.start
	if sr == nil || cr == nil || str == nil {
		var now []string
		if p, err := fresh(); err == nil {
			now = statusLines(p)
		}
		return u.failed(sp.next(), compKubelet+": syncPod", now,
			fmt.Errorf("%w: syncPod ran no %s stage for container %s (podlab kubelet --next says why)", ErrNotRunning, sp.missing(), ctr.Name))
	}
	reports = sp.reports
	id := cr.ContainerID

	// Step 14: the PLEG watches the container.
	comp := compKubelet + ": the PLEG"
	running, exit := u.watchContainer(ctx, k, pod, ctr.Name, id)
	did = nil
	if running {
		did = append(did, fmt.Sprintf("watched container %s for %s, as the PLEG relists the containers every second (CRI ListContainers, ContainerStatus): still running", id, u.o.Settle))
	} else {
		what := "it is not running"
		if exit != nil {
			what = fmt.Sprintf("it exited with code %d", exit.Code)
		}
		did = append(did, fmt.Sprintf("watched container %s for %s: %s", id, u.o.Settle, what))
	}
	if str.Pid > 0 {
		if app, err := ReadProcess(str.Pid, "", nil); err == nil {
			did = append(did, fmt.Sprintf("its process on the node: pid %d, %s", app.Pid, app.Command))
		}
	}
	if i := cr.Info; i != nil && i.ShimPid > 0 {
		did = append(did, fmt.Sprintf("the runtime's shim (pid %d) holds its stdout and stderr, writes them to %s and waits for its exit", i.ShimPid, u.res.LogPath))
	}
	u.podStep(14, comp, exit, did...)

	// Step 15: the status reports.
	comp = compKubelet + " → kube-apiserver (pods/status)"
	did = []string{"PUT pods/" + name + "/status after each stage that changed it:"}
	for _, r := range reports {
		if r.rec.StatusWritten {
			did = append(did, fmt.Sprintf("  after %-16s phase %s", r.stage+":", r.rec.Phase))
		}
	}
	if pod, err = fresh(); err != nil {
		return u.failed(15, comp, did, err)
	}
	before := pod.ResourceVersion
	if err := k.SyncPod(ctx, pod); err != nil {
		return u.failed(15, comp, did, err)
	}
	if pod, err = fresh(); err != nil {
		return u.failed(15, comp, did, err)
	}
	if pod.ResourceVersion != before {
		did = append(did, fmt.Sprintf("syncPod again, after the PLEG's relist: wrote the status at revision %s", pod.ResourceVersion))
	} else {
		did = append(did, "syncPod again, after the PLEG's relist: the status is up to date, nothing to write")
	}
	did = append(did, statusLines(pod)...)
	u.podStep(15, comp, pod, did...)
	u.res.Pod = pod

	// Step 16: the API server's revisions of the pod.
	comp = "kube-apiserver → etcd (bbolt)"
	did = u.history(ctx, pod)
	did = append(did,
		fmt.Sprintf("the latest is stored under %s in %s, resourceVersion %s", keyOf("pods", pod), u.storePath, pod.ResourceVersion),
		fmt.Sprintf("read it back: podlab get pod %s -o yaml; the raw key: podlab store get %s", name, keyOf("pods", pod)))
	u.podStep(16, comp, pod, did...)

	u.res.Next = u.next(sp.args)
	u.reach(ctx, k, pod, sr.Sandbox, ctr)
	if !running {
		return fmt.Errorf("%w: container %s of pod %s stopped (podlab logs %s, podlab describe pod %s)", ErrNotRunning, ctr.Name, name, name, name)
	}
	return nil
}

// watchContainer watches a container for Settle, as the kubelet's PLEG
// sees it (CRI): running is true if it still runs at the end.
func (u *upRun) watchContainer(ctx context.Context, k *kubelet.Kubelet, pod *corev1.Pod, name, id string) (bool, *kubelet.Exit) {
	deadline := time.Now().Add(u.o.Settle)
	for {
		st, err := k.Observe(ctx, pod)
		if err != nil {
			return false, nil
		}
		var run *kubelet.Run
		if cs := st.Container(name); cs != nil {
			for i := range cs.Runs {
				if cs.Runs[i].ID == id {
					run = &cs.Runs[i]
				}
			}
		}
		if run == nil {
			return false, nil
		}
		if run.State != kubelet.RunRunning {
			return false, run.Exit
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return true, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reach shows the app: a GET of its port from inside the pod's network
// namespace (what curl in the pod would do), then its log.
func (u *upRun) reach(ctx context.Context, k *kubelet.Kubelet, pod *corev1.Pod, sb kubelet.Sandbox, ctr corev1.Container) {
	if port := u.port(k, ctr); port > 0 && sb.Namespaces["net"] != "" {
		u.res.HTTP, u.res.HTTPErr = GetInPod(ctx, sb.Namespaces["net"], port, "/", u.o.HTTPWait)
	}
	// The app logs the request (nginx's access log is its stdout): give the
	// shim a moment to write it.
	read := func() string {
		var b bytes.Buffer
		kubelet.Logs(ctx, u.o.StateDir, pod, &b, kubelet.LogsOptions{Container: ctr.Name})
		return b.String()
	}
	u.res.Logs = read()
	if u.res.HTTP != nil {
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			if l := read(); l != u.res.Logs {
				u.res.Logs = l
				break
			}
		}
	}
	if a := u.res.HTTP; a != nil {
		did := []string{a.StatusLine}
		for _, h := range []string{"Server", "Content-Type", "Content-Length"} {
			if v := a.Header.Get(h); v != "" {
				did = append(did, h+": "+v)
			}
		}
		body := lines(a.Body)
		if len(body) > 8 {
			body = append(body[:8], "...")
		}
		for _, l := range body {
			did = append(did, "| "+l)
		}
		u.note(fmt.Sprintf("GET %s from inside the pod's network namespace, as curl in the pod would", a.URL), "podlab (a thread that setns(2)'d into "+a.Netns+")", did...)
	} else if u.res.HTTPErr != nil {
		u.note("no HTTP answer from inside the pod", "podlab", u.res.HTTPErr.Error())
	}
	logs := lines([]byte(u.res.Logs))
	if len(logs) > 20 {
		logs = append([]string{fmt.Sprintf("... (%d lines before)", len(logs)-20)}, logs[len(logs)-20:]...)
	}
	if len(logs) == 0 {
		logs = []string{"(empty so far)"}
	}
	for i, l := range logs {
		logs[i] = "| " + l
	}
	u.note(fmt.Sprintf("the container's log, as podlab logs %s shows it (%s)", pod.Name, u.res.LogPath), "kubelet.Logs", logs...)
}

// port is the container's port: its spec's first, else the image's first
// exposed TCP port.
func (u *upRun) port(k *kubelet.Kubelet, ctr corev1.Container) int {
	for _, p := range ctr.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			return int(p.ContainerPort)
		}
	}
	// the node's runtime is podlab's: its content store is the node's
	store, err := pull.OpenStore(k.Layout().ContentDir())
	if err != nil {
		return 0
	}
	st, err := store.Inspect(ctr.Image)
	if err != nil || st.ConfigJSON == nil {
		return 0
	}
	best := 0
	for p := range st.ConfigJSON.Config.ExposedPorts {
		num, proto, _ := strings.Cut(p, "/")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 || (proto != "" && proto != "tcp") {
			continue
		}
		if best == 0 || n < best {
			best = n
		}
	}
	return best
}

func sandboxState(st *kubelet.PodState) string {
	if st.Sandbox.Ready {
		return "the sandbox " + st.Sandbox.ID + " is ready"
	}
	return "no ready sandbox"
}

func presence(present bool) string {
	if present {
		return "is in the runtime's image store"
	}
	return "is not in the runtime's image store"
}

func runsState(cs *kubelet.ContainerState) string {
	if l := cs.Latest(); l != nil {
		return "runtime container " + l.ID + " " + l.State
	}
	return "no runtime container"
}

func events(rec kubelet.Recording) []string {
	var out []string
	for _, e := range rec.Events {
		out = append(out, "event "+e)
	}
	return out
}

// specLines says what config.json asks of runc.
func specLines(s *specs.Spec) []string {
	if s == nil || s.Process == nil {
		return nil
	}
	p := s.Process
	out := []string{fmt.Sprintf("  process %q, as uid %d gid %d, in %s", p.Args, p.User.UID, p.User.GID, p.Cwd)}
	if s.Root != nil {
		out = append(out, "  root "+s.Root.Path+" (relative to the bundle)")
	}
	if s.Linux != nil {
		var shared, own []string
		for _, ns := range s.Linux.Namespaces {
			if ns.Path != "" {
				shared = append(shared, string(ns.Type)+" "+ns.Path)
			} else {
				own = append(own, string(ns.Type))
			}
		}
		if len(shared) > 0 {
			out = append(out, "  joins the sandbox's: "+strings.Join(shared, ", "))
		}
		if len(own) > 0 {
			out = append(out, "  its own new: "+strings.Join(own, ", "))
		}
		out = append(out, "  cgroupsPath "+s.Linux.CgroupsPath)
	}
	if p.Capabilities != nil {
		out = append(out, fmt.Sprintf("  %d capabilities (bounding set)", len(p.Capabilities.Bounding)))
	}
	return out
}

// namespaceLines compares the process's namespaces with the node's and
// the sandbox's.
func namespaceLines(p *Process) []string {
	var out []string
	for _, ns := range p.Namespaces {
		what := "new: the container's own"
		switch {
		case ns.Pinned != "":
			what = "the pod's, pinned at " + ns.Pinned
		case ns.Host:
			what = "the node's (not unshared)"
		}
		out = append(out, fmt.Sprintf("  %-6s %s %s", ns.Kind, ns.ID, what))
	}
	return out
}

func cgroupLine(path string, cg *runc.Cgroup) string {
	if cg == nil {
		return path
	}
	return fmt.Sprintf("%s (%s): memory %s, pids %s, cpu quota %s per %s", path, cg.Layout, cg.Memory, cg.Pids, cg.CPUQuota, cg.CPUPeriod)
}

// statusLines sums up the pod's status as the API server has it.
func statusLines(p *corev1.Pod) []string {
	var conds []string
	for _, c := range p.Status.Conditions {
		conds = append(conds, string(c.Type)+"="+string(c.Status))
	}
	out := []string{fmt.Sprintf("the pod's status now: phase %s, hostIP %s; %s", p.Status.Phase, p.Status.HostIP, strings.Join(conds, " "))}
	for _, c := range p.Status.ContainerStatuses {
		out = append(out, fmt.Sprintf("  container %s: %s, ready %v, restartCount %d, containerID %s", c.Name, containerState(c.State), c.Ready, c.RestartCount, c.ContainerID))
	}
	return out
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Waiting != nil:
		return "waiting (" + s.Waiting.Reason + ")"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit code %d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}

// history replays every revision of the pod since Up began, through a
// watch from then: what the API server stored, in order.
func (u *upRun) history(ctx context.Context, pod *corev1.Pod) []string {
	from := u.startRV
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := u.admin.Watch(ctx, "pods", pod.Namespace, apiserver.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: from})
	if err != nil {
		return []string{"(its history: " + err.Error() + ")"}
	}
	out := []string{fmt.Sprintf("WATCH pods %s from revision %s, as admin: every revision of the pod, as etcd stored it", pod.Name, from)}
	var prev *corev1.Pod
	for ev := range w.Events() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.UID != pod.UID {
			continue
		}
		out = append(out, fmt.Sprintf("  revision %-6s %-8s %s", p.ResourceVersion, ev.Type, change(prev, p)))
		prev = p
		if p.ResourceVersion == pod.ResourceVersion {
			return out
		}
	}
	if err := w.Err(); err != nil && !apierrors.IsResourceExpired(err) {
		out = append(out, "  (the watch ended: "+err.Error()+")")
	}
	return out
}

// change says what one revision of a pod changed.
func change(prev, cur *corev1.Pod) string {
	if prev == nil {
		return fmt.Sprintf("created: %s, no node", cur.Status.Phase)
	}
	var parts []string
	if prev.Spec.NodeName != cur.Spec.NodeName {
		parts = append(parts, "spec.nodeName="+cur.Spec.NodeName)
	}
	if prev.Status.Phase != cur.Status.Phase {
		parts = append(parts, fmt.Sprintf("phase %s -> %s", prev.Status.Phase, cur.Status.Phase))
	}
	was := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range prev.Status.Conditions {
		was[c.Type] = c.Status
	}
	for _, c := range cur.Status.Conditions {
		if was[c.Type] != c.Status {
			parts = append(parts, string(c.Type)+"="+string(c.Status))
		}
	}
	old := map[string]corev1.ContainerStatus{}
	for _, c := range prev.Status.ContainerStatuses {
		old[c.Name] = c
	}
	for _, c := range cur.Status.ContainerStatuses {
		o := old[c.Name]
		if s := containerState(c.State); s != containerState(o.State) {
			parts = append(parts, "container "+c.Name+" "+s)
		}
		if c.ImageID != o.ImageID {
			parts = append(parts, "imageID "+c.ImageID)
		}
		if c.ContainerID != o.ContainerID {
			parts = append(parts, "containerID "+c.ContainerID)
		}
		if c.RestartCount != o.RestartCount {
			parts = append(parts, fmt.Sprintf("restartCount %d", c.RestartCount))
		}
	}
	if len(parts) == 0 {
		return "(metadata or timestamps)"
	}
	return strings.Join(parts, ", ")
}

// syncedPod follows one syncPod of podlab up's pod: each stage the
// kubelet reports becomes the chain's step for it.
type syncedPod struct {
	u         *upRun
	ctr       string
	regOffset int

	sandbox *kubelet.SandboxResult
	create  *kubelet.CreateResult
	start   *kubelet.StartResult
	args    []string // the container's command, from the runtime's spec
	reports []status
	err     error // the step that failed, as u.failed returned it
}

// stageSteps are the chain's steps of the stages. CreateContainer is
// steps 10 and 11 (the runtime unpacks the image, writes config.json, then
// runc create), and step 12 is read back before the start.
var stageSteps = map[kubelet.StageName]int{
	kubelet.StageSandbox: 8, kubelet.StagePull: 9, kubelet.StageCreate: 11, kubelet.StageStart: 13,
}

// stageComponents say who does each stage.
var stageComponents = map[kubelet.StageName]string{
	kubelet.StageSandbox: "kubelet → container runtime (CRI RunPodSandbox)",
	kubelet.StagePull:    "container runtime (CRI PullImage) ← the registry",
	kubelet.StageCreate:  "container runtime → OCI runtime (CRI CreateContainer: config.json, then runc create under podlab's shim)",
	kubelet.StageStart:   "runc start (CRI StartContainer)",
}

// next is the step after the last one done: where a failure is reported.
func (p *syncedPod) next() int {
	switch {
	case p.sandbox == nil:
		return 8
	case p.create == nil:
		return 10
	}
	return 13
}

func (p *syncedPod) missing() kubelet.StageName {
	switch {
	case p.sandbox == nil:
		return kubelet.StageSandbox
	case p.create == nil:
		return kubelet.StageCreate
	}
	return kubelet.StageStart
}

// reportLines is the report as podlab kubelet prints it, a line each.
func reportLines(r kubelet.Report) []string {
	var b bytes.Buffer
	kubelet.WriteReport(&b, r)
	var out []string
	for _, l := range lines(b.Bytes()) {
		out = append(out, strings.TrimPrefix(l, "    "))
	}
	return out
}

// onStage makes the chain's step of one stage the kubelet ran (Config.OnStage,
// called in syncPod, before its next stage).
func (p *syncedPod) onStage(r kubelet.Report) {
	u := p.u
	if p.err != nil || r.Pod == nil || (r.Stage.Container != "" && r.Stage.Container != p.ctr) {
		return
	}
	n, ok := stageSteps[r.Stage.Name]
	if !ok {
		return
	}
	comp := stageComponents[r.Stage.Name]
	did := reportLines(r)
	if r.Stage.Name == kubelet.StagePull && u.reg != nil {
		reqs, _ := u.reg.requests(p.regOffset)
		for _, q := range reqs {
			did = append(did, "registry: "+q)
		}
	}
	if r.Err != nil {
		if r.Stage.Name == kubelet.StagePull && u.reg != nil {
			var refs []string
			for _, l := range u.reg.Loaded {
				refs = append(refs, l.Ref)
			}
			did = append(did, fmt.Sprintf("the in-process registry serves only %s (from %s)", strings.Join(refs, ", "), u.reg.Images))
		}
		p.err = u.failed(n, comp, did, r.Err)
		return
	}
	switch res := r.Result.(type) {
	case *kubelet.SandboxResult:
		p.sandbox = res
		p.reports = append(p.reports, status{"RunPodSandbox", res.Recording})
		did = append(did, "every container of the pod joins these namespaces: that is what \"inside the pod\" means (one IP, one localhost, one hostname)")
		u.podStep(n, comp, res, did...)
	case *kubelet.PullResult:
		p.reports = append(p.reports, status{"PullImage", res.Recording})
		u.podStep(n, comp, res, did...)
	case *kubelet.CreateResult:
		p.create = res
		p.reports = append(p.reports, status{"CreateContainer", res.Recording})
		u.res.ContainerID = res.ContainerID
		if res.Status != nil {
			u.res.LogPath = res.Status.LogPath
		}
		var sp *specs.Spec
		rootfs := ""
		if i := res.Info; i != nil {
			u.res.Bundle = i.Bundle
			var s specs.Spec
			if json.Unmarshal(i.RuntimeSpec, &s) == nil {
				sp = &s
				if s.Process != nil {
					p.args = s.Process.Args
				}
				if s.Root != nil {
					rootfs = s.Root.Path
					if !filepath.IsAbs(rootfs) {
						rootfs = filepath.Join(i.Bundle, rootfs)
					}
				}
			}
		}
		// Step 10: the unpack the runtime did inside CreateContainer.
		unpacked := []string{"CreateContainer: the runtime unpacked the image into the container's bundle, as containerd prepares a snapshot"}
		if rootfs != "" {
			unpacked = append(unpacked, "rootfs "+rootfs)
		}
		u.podStep(10, "container runtime (CRI CreateContainer: the rootfs)", res, unpacked...)
		did = append(did, specLines(sp)...)
		if i := res.Info; i != nil && i.Pid > 0 {
			did = append(did, fmt.Sprintf("runc create (run by podlab's shim, pid %d): its process, pid %d, waits for runc start", i.ShimPid, i.Pid))
		}
		u.podStep(n, comp, res, did...)
		if i := res.Info; i != nil && i.Pid > 0 {
			p.readBack(i.Pid, rootfs)
		}
	case *kubelet.StartResult:
		p.start = res
		p.reports = append(p.reports, status{"StartContainer", res.Recording})
		did = append(did, "runc start opened the exec fifo: runc init exec'd the app, which is pid 1 of its PID namespace")
		if res.Pid > 0 {
			if app, err := ReadProcess(res.Pid, "", nil); err == nil {
				did = append(did,
					fmt.Sprintf("pid %d (on the node) is now: %s", app.Pid, app.Command),
					fmt.Sprintf("its effective capabilities after execve: %d (uid %s)", len(CapNames(app.CapEff)), app.UID))
			}
		}
		u.podStep(n, comp, res, did...)
	}
}

// readBack is step 12: what runc create did, read back from the kernel
// while runc init waits on the exec fifo (before the kubelet's start).
func (p *syncedPod) readBack(pid int, rootfs string) {
	u := p.u
	comp := fmt.Sprintf("runc (runc init, pid %d, before the app)", pid)
	if p.sandbox == nil {
		return
	}
	proc, err := ReadProcess(pid, rootfs, p.sandbox.Sandbox.Namespaces)
	if err != nil {
		p.err = u.failed(12, comp, nil, err)
		return
	}
	did := []string{fmt.Sprintf("read back from /proc/%d, while it waits on the exec fifo:", pid)}
	did = append(did, namespaceLines(proc)...)
	if proc.RootIs {
		did = append(did, fmt.Sprintf("  root   /proc/%d/root is %s (same inode): pivot_root into the bundle's rootfs", pid, rootfs))
	} else {
		did = append(did, fmt.Sprintf("  root   /proc/%d/root is not %s (pivot_root not seen)", pid, rootfs))
	}
	did = append(did, "  cgroup "+cgroupLine(proc.Cgroup, nil))
	caps := CapNames(proc.CapBnd)
	did = append(did,
		fmt.Sprintf("  caps   bounding set %d: %s", len(caps), strings.Join(caps, " ")),
		fmt.Sprintf("  user   uid %s, gid %s (real effective saved fs); no_new_privs %s, seccomp mode %s%s",
			proc.UID, proc.GID, proc.NoNewPrivs, proc.Seccomp, map[bool]string{true: " (a filter)", false: ""}[proc.Seccomp == "2"]))
	u.podStep(12, comp, proc, did...)
}
