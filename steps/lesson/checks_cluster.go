package lesson

// The checks of the lessons that run a cluster or a runtime of their own
// (14 to 19). Lessons 15 to 19 keep it in a state directory of their own
// ($PWD/lab-NN) and run `podlab check NN` with PODLAB_STATE_DIR set to it,
// before they reset it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/trace"
)

// 14: the API over HTTP, by hand.
func httpChecks() []check {
	return []check{
		{"pod by-curl was created by a POST, then deleted by a DELETE (the store's history)", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			const how = "POST it to /api/v1/namespaces/default/pods with curl as the developer, then DELETE it (lesson 14: `curl -s $C -X POST ... $SERVER/api/v1/namespaces/default/pods`)"
			tl, err := trace.Pod(ctx, c, "default", "by-curl")
			if errors.Is(err, trace.ErrNeverCreated) {
				return fail("pod default/by-curl is in neither the store nor its history: %s", how)
			}
			if err != nil {
				return fmt.Errorf("reading pod by-curl's history: %w", err)
			}
			if len(tl.Pods) == 0 || tl.Pods[0].Deleted == nil {
				return fail("pod default/by-curl is still there: `curl -s $C -X DELETE $SERVER/api/v1/namespaces/default/pods/by-curl`")
			}
			return nil
		}},
	}
}

// 15: a node dies, its pods are evicted and come back elsewhere.
func nodeDiesChecks() []check {
	return []check{
		{"pods of an unreachable node were evicted (TaintManagerEviction events)", func(ctx context.Context, p *probe) error {
			events, err := p.events(ctx)
			if err != nil {
				return err
			}
			for _, e := range events {
				if e.Reason == "TaintManagerEviction" && e.InvolvedObject.Kind == "Pod" {
					return nil
				}
			}
			return fail("no TaintManagerEviction event: kill a node's kubelet (`kill -KILL $KUBELET_2`) with the controller-manager running (`podlab controller-manager --node-monitor-grace-period 8s`), and wait for its taint's toleration to run out (lesson 15)")
		}},
		{"deployment web has every replica Ready again", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			o, err := c.Get(ctx, "deployments", "default", "web")
			if apierrors.IsNotFound(err) {
				return fail("no deployment default/web: `kubectl create deployment web --image=$REGISTRY/podlab/hello:1.0 --replicas=4` (lesson 15)")
			}
			if err != nil {
				return err
			}
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				return fmt.Errorf("deployments/web is a %T", o)
			}
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if want == 0 || d.Status.ReadyReplicas < want {
				return fail("deployment web has %d of %d replicas ready: keep the controller-manager, the scheduler and a kubelet running (`podlab kubelet --node node-1 &`), and look at `kubectl get pods -o wide`", d.Status.ReadyReplicas, want)
			}
			return nil
		}},
	}
}

// 16: pods on a network.
func networkChecks() []check {
	cidrs := func(ctx context.Context, p *probe) (map[string]*net.IPNet, error) {
		c, err := p.api()
		if err != nil {
			return nil, err
		}
		l, err := c.List(ctx, "nodes", "", apiserver.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]*net.IPNet{}
		for _, o := range l.Items {
			n, ok := o.(*corev1.Node)
			if !ok || n.Spec.PodCIDR == "" {
				continue
			}
			if _, ipnet, err := net.ParseCIDR(n.Spec.PodCIDR); err == nil {
				out[n.Name] = ipnet
			}
		}
		return out, nil
	}
	const ipam = "run the controller-manager with node IPAM, `podlab controller-manager --allocate-node-cidrs --cluster-cidr 10.244.0.0/16`, and join two nodes, `podlab node join node-1` and `podlab node join node-2` (lesson 16)"
	return []check{
		{"two nodes have pod CIDRs of their own (node IPAM)", func(ctx context.Context, p *probe) error {
			m, err := cidrs(ctx, p)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, n := range m {
				seen[n.String()] = true
			}
			if len(m) < 2 || len(seen) < len(m) {
				return fail("%d node(s) with a podCIDR (%d distinct): %s", len(m), len(seen), ipam)
			}
			return nil
		}},
		{"pods on two nodes run with IPs from their node's pod CIDR", func(ctx context.Context, p *probe) error {
			m, err := cidrs(ctx, p)
			if err != nil {
				return err
			}
			pods, err := p.pods(ctx, "", "")
			if err != nil {
				return err
			}
			nodes := map[string]bool{}
			var wrong []string
			for _, pod := range pods {
				if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.Spec.HostNetwork {
					continue
				}
				cidr := m[pod.Spec.NodeName]
				if cidr == nil || !cidr.Contains(net.ParseIP(pod.Status.PodIP)) {
					wrong = append(wrong, fmt.Sprintf("%s/%s %s on %s", pod.Namespace, pod.Name, pod.Status.PodIP, pod.Spec.NodeName))
					continue
				}
				nodes[pod.Spec.NodeName] = true
			}
			if len(wrong) > 0 {
				return fail("pods whose IP is not from their node's podCIDR: %s: the runtime's CNI conflist must take the node's podCIDR (look at `podlab describe node NAME` and the kubelet's log)", strings.Join(wrong, ", "))
			}
			if len(nodes) < 2 {
				return fail("Running pods with a pod IP on %d node(s), want 2: run the kubelets and the network agents of both nodes, and a Deployment of 2 with one pod on each (lesson 16: `kubectl apply -f web-16.yaml`)", len(nodes))
			}
			return nil
		}},
	}
}

// 17: the runtime over CRI, by hand with crictl.
func criChecks() []check {
	return []check{
		{"a container made over CRI runs in node-1's runtime", func(ctx context.Context, p *probe) error {
			n := p.layout().Node(checkNode)
			records, err := filepath.Glob(filepath.Join(n.CRIContainersDir(), "*.json"))
			if err != nil {
				return err
			}
			const how = "serve node-1's runtime, `podlab runtime --node node-1 &`, then with crictl: `crictl runp`, `crictl create`, `crictl start` (lesson 17)"
			if len(records) == 0 {
				return fail("node-1's runtime has no container record in %s: %s", n.CRIContainersDir(), how)
			}
			r := n.Runtime()
			rt := &runc.Runtime{Binary: p.runtime(), Root: r.RuncRoot(), StateDir: r.Dir, CgroupParent: r.CgroupParent}
			for _, rec := range records {
				id := strings.TrimSuffix(filepath.Base(rec), ".json")
				if st, err := rt.State(ctx, id); err == nil && st.Status == "running" {
					return nil
				}
			}
			return fail("none of the %d container(s) node-1's runtime made runs (runc --root %s list): `crictl start CONTAINER-ID` (lesson 17)", len(records), r.RuncRoot())
		}},
	}
}

// 18: the real containerd, side by side.
func containerdChecks() []check {
	return []check{
		{"containerd's content store holds the images it pulled", func(ctx context.Context, p *probe) error {
			dir := filepath.Join(p.env.StateDir, "containerd", "root", "io.containerd.content.v1.content", "blobs", "sha256")
			blobs, err := os.ReadDir(dir)
			if err != nil || len(blobs) == 0 {
				return fail("no blob in %s: start the lab containerd, `podlab containerd &`, and have it pull with crictl, `crictl pull $REGISTRY/podlab/hello:1.0` (lesson 18)", dir)
			}
			return nil
		}},
		{"containerd's shim runs a container under the state directory", func(ctx context.Context, p *probe) error {
			root := filepath.Join(p.env.StateDir, "containerd", "runc", "k8s.io")
			const how = "with the lab containerd running (`podlab containerd &`), `crictl runp`, `crictl create` and `crictl start` (lesson 18)"
			if _, err := os.Stat(root); err != nil {
				return fail("containerd has run nothing under %s (%v): %s", root, err, how)
			}
			rt := &runc.Runtime{Binary: p.runtime(), Root: root}
			ls, err := rt.List(ctx)
			if err != nil {
				return err
			}
			for _, c := range ls {
				if c.Status == "running" {
					return nil
				}
			}
			return fail("no container runs under %s (%d listed): %s", root, len(ls), how)
		}},
	}
}

// 19: RuntimeClass: another OCI runtime for a pod.
func runtimeClassChecks() []check {
	return []check{
		{"RuntimeClass gvisor names the handler runsc", func(ctx context.Context, p *probe) error {
			c, err := p.api()
			if err != nil {
				return err
			}
			o, err := c.Get(ctx, "runtimeclasses", "", "gvisor")
			if apierrors.IsNotFound(err) {
				return fail("no RuntimeClass gvisor: `kubectl apply -f runtimeclass-19.yaml` (lesson 19)")
			}
			if err != nil {
				return err
			}
			rc, ok := o.(*nodev1.RuntimeClass)
			if !ok {
				return fmt.Errorf("runtimeclasses/gvisor is a %T", o)
			}
			if rc.Handler != "runsc" {
				return fail("RuntimeClass gvisor names the handler %q: delete it, `kubectl delete runtimeclass gvisor`, and apply lesson 19's (handler runsc)", rc.Handler)
			}
			return nil
		}},
		{"pod gvisor-19 started under gVisor, then was deleted", func(ctx context.Context, p *probe) error {
			const how = "`kubectl apply -f gvisor-19.yaml` with the kubelet and the scheduler running, then `kubectl delete pod gvisor-19` (lesson 19)"
			return failedAndDeleted(ctx, p, "gvisor-19", how, "Started", "Started container")
		}},
		{"pod kata-19's sandbox failed (no handler kata), then it was deleted", func(ctx context.Context, p *probe) error {
			const how = "`kubectl apply -f kata-19.yaml`, wait for its FailedCreatePodSandBox event, then `kubectl delete pod kata-19` (lesson 19)"
			return failedAndDeleted(ctx, p, "kata-19", how, "FailedCreatePodSandBox", `no runtime for "kata"`)
		}},
	}
}
