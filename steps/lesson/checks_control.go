package lesson

// The checks of the lessons about the control plane: the API server and its
// store, the scheduler, the kubelet, status and logs, Deployments.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/trace"
)

// 01: the machine and the registry.
func setupChecks() []check {
	return []check{
		{"this machine can run containers (podlab doctor)", func(ctx context.Context, p *probe) error {
			var failed []string
			for _, f := range runc.Doctor(ctx, p.runtime()) {
				if f.Status == runc.StatusFail {
					failed = append(failed, fmt.Sprintf("%s: %s (fix: %s)", f.Check, f.Detail, f.Fix))
				}
			}
			if len(failed) > 0 {
				return fail("%s; then run `podlab doctor`", strings.Join(failed, "; "))
			}
			return nil
		}},
		{"the registry serves the demo images", func(ctx context.Context, p *probe) error {
			url := "http://" + p.registry() + "/v2/_catalog"
			const start = "start it in a terminal of its own, `podlab registry serve` (`make images` builds what it serves), or give its address with --registry or $REGISTRY"
			repos, err := catalog(ctx, url)
			if err != nil {
				return fail("GET %s: %v: %s", url, err, start)
			}
			for _, want := range []string{"library/nginx", "podlab/hello"} {
				if !slices.Contains(repos, want) {
					return fail("the registry at %s lists %q, not %s: run `make images`, then restart `podlab registry serve`", p.registry(), repos, want)
				}
			}
			return nil
		}},
	}
}

// catalog asks a registry for its repositories (GET /v2/_catalog).
func catalog(ctx context.Context, url string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var body struct {
		Repositories []string `json:"repositories"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("reading the catalog: %w", err)
	}
	return body.Repositories, nil
}

// pkiMade checks what `podlab init`'s PKI step made: a CA that can sign, the
// admin's client certificate, signed by it for client authentication, and
// its kubeconfig.
func pkiMade(l statedir.Layout) error {
	if _, err := os.Stat(l.CACert()); errors.Is(err, fs.ErrNotExist) {
		return fail("no cluster CA (%s): run `podlab init` (lesson 02)", l.CACert())
	}
	ca, err := pki.LoadCA(l, time.Now())
	if err != nil {
		return err
	}
	admin, err := pki.LoadKeyPair(l.PKICert("admin"), l.PKIKey("admin"))
	if err != nil {
		return fail("%v: run `podlab init` again, which issues it anew", err)
	}
	if _, err := admin.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fail("%s does not verify against %s (%v): run `podlab init` again, which issues it anew", l.PKICert("admin"), l.CACert(), err)
	}
	if _, err := os.Stat(l.Kubeconfig("admin")); err != nil {
		return fail("no admin kubeconfig (%v): run `podlab init` again", err)
	}
	return nil
}

// 02: the API server's gate.
func apiserverChecks() []check {
	return []check{
		{"the control plane is initialized (token file and store)", func(ctx context.Context, p *probe) error {
			_, err := p.api()
			return err
		}},
		{"the cluster CA signed the admin's client certificate and kubeconfig", func(ctx context.Context, p *probe) error {
			return pkiMade(p.layout())
		}},
		{"pod web is stored", func(ctx context.Context, p *probe) error {
			_, err := p.pod(ctx, "default", "web")
			if apierrors.IsNotFound(err) {
				return fail("no pod default/web: create it as the admin: `podlab run web --image nginx`")
			}
			return err
		}},
		{"pod web is Pending with no node", func(ctx context.Context, p *probe) error {
			pod, err := p.pod(ctx, "default", "web")
			if apierrors.IsNotFound(err) {
				return fail("no pod default/web: create it as the admin: `podlab run web --image nginx`")
			}
			if err != nil {
				return err
			}
			if pod.Spec.NodeName != "" {
				return fail("web is bound to %s already: the scheduler's work of lesson 04; this check holds right after lesson 02", pod.Spec.NodeName)
			}
			if pod.Status.Phase != corev1.PodPending {
				return fail("web is %s: a new pod is Pending", pod.Status.Phase)
			}
			return nil
		}},
		{"namespace locked enforces the restricted Pod Security level", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			o, err := c.Get(ctx, "namespaces", "", "locked")
			if apierrors.IsNotFound(err) {
				return fail("no namespace locked: `podlab create namespace locked --labels pod-security.kubernetes.io/enforce=restricted`")
			}
			if err != nil {
				return err
			}
			if v := o.GetLabels()["pod-security.kubernetes.io/enforce"]; v != "restricted" {
				return fail("namespace locked has pod-security.kubernetes.io/enforce=%q: delete it and create it with --labels pod-security.kubernetes.io/enforce=restricted", v)
			}
			return nil
		}},
		{"the refused requests stored nothing", func(ctx context.Context, p *probe) error {
			locked, err := p.pods(ctx, "locked", "")
			if err != nil {
				return err
			}
			if len(locked) > 0 {
				return fail("pods in namespace locked: %s: PodSecurity should have refused them", names(locked))
			}
			if _, err := p.pod(ctx, "default", "db"); err == nil {
				return fail("pod default/db exists: `podlab run db --image nginx --as viewer` must be refused (403); delete it with `podlab delete pod db`")
			} else if !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}},
	}
}

// 03: reading back, and the store's revisions, watch and compaction.
func storeChecks() []check {
	return []check{
		{"pod web reads back through the gate", func(ctx context.Context, p *probe) error {
			pod, err := p.pod(ctx, "default", "web")
			if apierrors.IsNotFound(err) {
				return fail("no pod default/web: lesson 02 creates it (`podlab run web --image nginx`)")
			}
			if err != nil {
				return err
			}
			if pod.ResourceVersion == "" {
				return fail("web has no resourceVersion: the API server sets it from the key's mod_revision on every read")
			}
			return nil
		}},
		{"pod db was created, then deleted (the store's history)", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			const how = "create it and delete it, `podlab run db --image nginx`, then `podlab delete pod db`; compact only revisions before it (lesson 03)"
			tl, err := trace.Pod(ctx, c, "default", "db")
			if errors.Is(err, trace.ErrNeverCreated) {
				return fail("pod default/db is in neither the store nor its history (%v): %s", err, how)
			}
			if err != nil {
				return fmt.Errorf("reading pod db's history: %w", err)
			}
			if len(tl.Pods) == 0 || tl.Pods[0].Deleted == nil {
				return fail("pod default/db is still there: `podlab delete pod db`")
			}
			return nil
		}},
		{"the store's history is compacted (a watch from revision 1 is 410 Gone)", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w, err := c.Watch(ctx, "pods", "", apiserver.ListOptions{ResourceVersion: "1"})
			if err == nil {
				cancel()
				for range w.Events() {
				}
				return fail("a watch from revision 1 still replays the history: compact it up to the revision before db was created, `podlab store compact 9` in lesson 03 (`podlab store compact REV`)")
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return nil
			}
			return err
		}},
	}
}

// 04: the scheduler bound a pod.
func schedulerChecks() []check {
	return []check{
		{"a pod is bound to a node", func(ctx context.Context, p *probe) error {
			bound, err := boundPods(ctx, p)
			if err != nil {
				return err
			}
			if len(bound) == 0 {
				return fail("no pod has a node yet: run the scheduler once, `podlab scheduler --once` (`podlab get pods -o wide` shows NODE)")
			}
			return nil
		}},
		{"the scheduler recorded a Scheduled event", func(ctx context.Context, p *probe) error {
			bound, err := boundPods(ctx, p)
			if err != nil {
				return err
			}
			events, err := p.events(ctx)
			if err != nil {
				return err
			}
			for _, e := range events {
				if e.Reason != "Scheduled" || e.InvolvedObject.Kind != "Pod" {
					continue
				}
				for _, pod := range bound {
					if e.InvolvedObject.Namespace == pod.Namespace && e.InvolvedObject.Name == pod.Name {
						return nil
					}
				}
			}
			return fail("no Scheduled event for a bound pod: the scheduler writes one as it binds (`podlab get events`); run `podlab scheduler --once`")
		}},
	}
}

func boundPods(ctx context.Context, p *probe) ([]*corev1.Pod, error) {
	pods, err := p.pods(ctx, "", "")
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			out = append(out, pod)
		}
	}
	return out, nil
}

func (p *probe) events(ctx context.Context) ([]*corev1.Event, error) {
	c, err := p.api()
	if err != nil {
		return nil, err
	}
	l, err := c.List(ctx, "events", "", apiserver.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	var out []*corev1.Event
	for _, o := range l.Items {
		if e, ok := o.(*corev1.Event); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// checkNode is the node the kubelet of lesson 05 runs by default.
const checkNode = apiserver.HostNode

// 05: the kubelet runs a bound pod.
func kubeletChecks() []check {
	running := func(ctx context.Context, p *probe) (*corev1.Pod, error) {
		pods, err := p.pods(ctx, "", "spec.nodeName="+checkNode)
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			if pod.Status.Phase == corev1.PodRunning {
				return pod, nil
			}
		}
		return nil, fail("no pod is Running on %s (pods there: %s): run its kubelet, `podlab kubelet --once`", checkNode, names(pods))
	}
	return []check{
		{"node " + checkNode + " is registered", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			if _, err := c.Get(ctx, "nodes", "", checkNode); apierrors.IsNotFound(err) {
				return fail("no Node %s: its kubelet registers it, `podlab kubelet --once`", checkNode)
			} else if err != nil {
				return err
			}
			return nil
		}},
		{"a pod is Running on " + checkNode, func(ctx context.Context, p *probe) error {
			_, err := running(ctx, p)
			return err
		}},
		{"its containers run in runc on " + checkNode, func(ctx context.Context, p *probe) error {
			pod, err := running(ctx, p)
			if err != nil {
				return err
			}
			r := p.layout().Node(checkNode).Runtime()
			rt := &runc.Runtime{Binary: p.runtime(), Root: r.RuncRoot(), StateDir: r.Dir, CgroupParent: r.CgroupParent}
			for _, cs := range pod.Status.ContainerStatuses {
				cid, err := kubelet.ParseContainerID(cs.ContainerID)
				if err != nil {
					return fail("container %s of pod %s: its status's %v", cs.Name, pod.Name, err)
				}
				if cid.Type != cri.Name {
					return fail("container %s of pod %s runs in the runtime %s (containerID %s), not podlab's (%s://): the lesson's kubelet talks to `podlab runtime`", cs.Name, pod.Name, cid.Type, cs.ContainerID, cri.Name)
				}
				id := cid.ID
				st, err := rt.State(ctx, id)
				if err != nil {
					return fail("container %s of pod %s: %v", cs.Name, pod.Name, err)
				}
				if st.Status != "running" {
					return fail("runc says container %s is %s, the pod's status says Running: run `podlab kubelet --once` to report it", id, st.Status)
				}
			}
			if len(pod.Status.ContainerStatuses) == 0 {
				return fail("pod %s reports no container: run `podlab kubelet --once`", pod.Name)
			}
			return nil
		}},
	}
}

// 10: status and logs, and pods that fail.
func logsChecks() []check {
	return []check{
		{"a container's log has output", func(ctx context.Context, p *probe) error {
			bound, err := boundPods(ctx, p)
			if err != nil {
				return err
			}
			for _, pod := range bound {
				var buf bytes.Buffer
				if _, err := kubelet.Logs(ctx, p.env.StateDir, pod, &buf, kubelet.LogsOptions{}); err == nil && buf.Len() > 0 {
					return nil
				}
			}
			return fail("no pod on a node has a container log with output (pods on nodes: %s): run one, then `podlab logs POD`", names(bound))
		}},
		{"pod crash restarted after a back-off (CrashLoopBackOff), then was deleted", func(ctx context.Context, p *probe) error {
			const how = "`podlab run crash --image $REGISTRY/podlab/hello:1.0 -- --no-such-flag`, `podlab scheduler --once`, `podlab kubelet --node node-1 --once` (twice, 11 seconds apart), then `podlab delete pod crash` and `podlab kubelet --node node-1 --once` (lesson 10)"
			return failedAndDeleted(ctx, p, "crash", how, "BackOff", "Back-off restarting failed container")
		}},
		{"pod ghost's image pull failed (ErrImagePull, then ImagePullBackOff), then it was deleted", func(ctx context.Context, p *probe) error {
			const how = "`podlab run ghost --image $REGISTRY/podlab/ghost:1.0`, `podlab scheduler --once`, `podlab kubelet --node node-1` for a few seconds, then `podlab delete pod ghost` and `podlab kubelet --node node-1 --once` (lesson 10)"
			return failedAndDeleted(ctx, p, "ghost", how, "Failed", "Error: "+kubelet.ReasonErrImagePull, "Failed", "Error: "+kubelet.ReasonImagePullBackOff)
		}},
	}
}

// failedAndDeleted reads the history of pod default/name (`podlab trace`):
// it must hold the kubelet's events reasonAndMessage lists (pairs of a
// reason and a substring of the message), and the pod's deletion. how is
// what the lesson did to leave them.
func failedAndDeleted(ctx context.Context, p *probe, name, how string, reasonAndMessage ...string) error {
	c, err := p.api()
	if err != nil {
		return err
	}
	tl, err := trace.Pod(ctx, c, "default", name)
	if errors.Is(err, trace.ErrNeverCreated) {
		return fail("pod default/%s is in neither the store nor its history: %s", name, how)
	}
	if err != nil {
		return fmt.Errorf("reading pod %s's history: %w", name, err)
	}
	for i := 0; i+1 < len(reasonAndMessage); i += 2 {
		reason, msg := reasonAndMessage[i], reasonAndMessage[i+1]
		if !slices.ContainsFunc(tl.Entries, func(e trace.Entry) bool {
			return e.Resource == "events" && e.Stage == reason && strings.Contains(e.Detail, msg)
		}) {
			return fail("pod %s's history holds no %s event %q from its kubelet (`podlab trace pod/%s` shows it): %s", name, reason, msg, name, how)
		}
	}
	if len(tl.Pods) == 0 || tl.Pods[0].Deleted == nil {
		return fail("pod default/%s is still there: `podlab delete pod %s`, then `podlab kubelet --node node-1 --once` stops its containers and removes it", name, name)
	}
	return nil
}

// 11: a Deployment, its ReplicaSet and pods.
func deploymentChecks() []check {
	return []check{
		{"a Deployment owns a ReplicaSet named NAME-<pod-template-hash>", func(ctx context.Context, p *probe) error {
			_, err := ownedReplicaSet(ctx, p)
			return err
		}},
		{"the Deployment's pods are Ready", func(ctx context.Context, p *probe) error {
			d, err := ownedReplicaSet(ctx, p)
			if err != nil {
				return err
			}
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if want == 0 || d.Status.ReadyReplicas < want {
				return fail("deployment %s has %d of %d replicas ready: run the controller-manager, the scheduler and the kubelets (`--once` each), then `podlab get deployments`", d.Name, d.Status.ReadyReplicas, want)
			}
			return nil
		}},
	}
}

// ownedReplicaSet returns a Deployment that owns a ReplicaSet named
// <deployment>-<pod-template-hash>, as the deployment controller names them.
func ownedReplicaSet(ctx context.Context, p *probe) (*appsv1.Deployment, error) {
	c, err := p.api()
	if err != nil {
		return nil, err
	}
	dl, err := c.List(ctx, "deployments", "", apiserver.ListOptions{})
	if err != nil {
		return nil, err
	}
	rl, err := c.List(ctx, "replicasets", "", apiserver.ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(dl.Items) == 0 {
		return nil, fail("no Deployment: `podlab create deployment web2 --image nginx --replicas 2` (lesson 11)")
	}
	for _, o := range dl.Items {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		for _, ro := range rl.Items {
			rs, ok := ro.(*appsv1.ReplicaSet)
			if !ok || rs.Namespace != d.Namespace {
				continue
			}
			for _, ref := range rs.OwnerReferences {
				if ref.UID == d.UID && ref.Controller != nil && *ref.Controller &&
					rs.Name == d.Name+"-"+rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] {
					return d, nil
				}
			}
		}
	}
	return nil, fail("no ReplicaSet is owned by a Deployment and named after it and its pod-template-hash: run the controller-manager once, `podlab controller-manager --once`")
}

// 12: all components together.
func togetherChecks() []check {
	return []check{
		{"a node is Ready", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			l, err := c.List(ctx, "nodes", "", apiserver.ListOptions{})
			if err != nil {
				return err
			}
			for _, o := range l.Items {
				n, ok := o.(*corev1.Node)
				if !ok {
					continue
				}
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						return nil
					}
				}
			}
			return fail("no node is Ready: start its kubelet, `podlab kubelet` (it posts a heartbeat every 10 seconds)")
		}},
		{"the pods are Running", func(ctx context.Context, p *probe) error {
			pods, err := p.pods(ctx, "", "")
			if err != nil {
				return err
			}
			var notRunning []*corev1.Pod
			running := 0
			for _, pod := range pods {
				switch {
				case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded:
				case pod.Status.Phase == corev1.PodRunning:
					running++
				default:
					notRunning = append(notRunning, pod)
				}
			}
			if running == 0 || len(notRunning) > 0 {
				return fail("%d pod(s) Running; not Running: %s: keep the scheduler, the controller-manager and the kubelet running, and look at `podlab get pods -A -o wide` and `podlab describe pod NAME`", running, names(notRunning))
			}
			return nil
		}},
		{"deployment greeter's 2 pods are Running", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			o, err := c.Get(ctx, "deployments", "default", "greeter")
			if apierrors.IsNotFound(err) {
				return fail("no deployment default/greeter: with the kubelet, the scheduler and the controller-manager running, `podlab create deployment greeter --image $REGISTRY/podlab/hello:1.0 --replicas 2` (lesson 12)")
			}
			if err != nil {
				return err
			}
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				return fmt.Errorf("deployments/greeter is a %T", o)
			}
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil {
				return fail("deployment greeter's selector: %v: delete it, `podlab delete deployment greeter`, and create it again", err)
			}
			pods, err := p.pods(ctx, "default", "")
			if err != nil {
				return err
			}
			running := 0
			for _, pod := range pods {
				if sel.Matches(labels.Set(pod.Labels)) && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running < 2 {
				return fail("deployment greeter has %d Running pod(s), want 2: keep the kubelet, the scheduler and the controller-manager running (`podlab kubelet --node node-1 &`, `podlab scheduler &`, `podlab controller-manager &`) and look at `podlab get pods -l app=greeter`", running)
			}
			return nil
		}},
		{"the greeter pod you deleted was replaced by its ReplicaSet", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			const how = "with the components running, delete one of greeter's pods, `podlab delete pod/NAME`, and wait for its ReplicaSet to replace it (lesson 12)"
			tl, err := trace.Deployment(ctx, c, "default", "greeter")
			if errors.Is(err, trace.ErrNeverCreated) {
				return fail("deployment default/greeter is in neither the store nor its history: `podlab create deployment greeter --image $REGISTRY/podlab/hello:1.0 --replicas 2`, then %s", how)
			}
			if err != nil {
				return fmt.Errorf("reading deployment greeter's history: %w", err)
			}
			deleted, live := 0, 0
			for _, pod := range tl.Pods {
				if pod.Deleted != nil {
					deleted++
				} else {
					live++
				}
			}
			if deleted == 0 || live < 2 {
				return fail("greeter's history holds %d pod(s) deleted and %d not (`podlab trace deployment/greeter` shows them), want one deleted and 2 that replaced it and stayed: %s", deleted, live, how)
			}
			return nil
		}},
	}
}
