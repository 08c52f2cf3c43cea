package main

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

var nodeCommand = &cli.Command{
	Name:  "node",
	Usage: "add nodes with declared capacity, for the scheduler to choose from; join them to the lab network as machines of their own, and leave",
	Subcommands: []*cli.Command{newNodeJoinCommand(), newNodeLeaveCommand(), {
		Name:      "add",
		Usage:     "register a Node with the capacity you declare",
		ArgsUsage: "NAME [--cpu 2] [--memory 4Gi] [--pods 110] [--labels k=v,...] [--taints key=value:NoSchedule,...]",
		Description: `A Node object is how the scheduler knows a machine: its capacity and
allocatable resources (status), its labels (for nodeSelector and affinity)
and its taints (which repel pods that do not tolerate them). A kubelet
registers its own node with the machine's real capacity; podlab has one
machine, so an extra node declares a capacity instead: the one thing
podlab does not measure. Its kubelet (podlab kubelet --node NAME) runs its
pods on this same machine, with its own state.

It also adds the kubelet's identity, system:node:NAME in the group
system:nodes, to the token file, and has the cluster CA sign its two
certificates: pki/NAME.crt (its client certificate, with the kubeconfig
kubeconfigs/NAME.kubeconfig) and pki/kubelet-NAME.crt (its serving
certificate).

Taints are key[=value]:Effect, the effect NoSchedule, PreferNoSchedule or
NoExecute.

podlab node join NAME goes further: it makes the node a machine of its own,
with its own network namespace and address on the lab network, where its
kubelet then runs.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cpu", Value: "2", Usage: "CPU capacity, in cores or millicores (500m)"},
			&cli.StringFlag{Name: "memory", Value: "4Gi", Usage: "memory capacity (4Gi, 512Mi)"},
			&cli.IntFlag{Name: "pods", Value: 110, Usage: "how many pods the node takes"},
			&cli.StringFlag{Name: "labels", Aliases: []string{"l"}, Usage: "labels, k=v,k2=v2"},
			&cli.StringFlag{Name: "taints", Usage: "taints, key=value:NoSchedule,..."},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("podlab node add needs one name: podlab node add NAME --cpu 2 --memory 4Gi")
			}
			node, err := nodeFromFlags(c)
			if err != nil {
				return err
			}
			if err := pki.CheckNodeName(node.Name); err != nil {
				return err
			}
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			s, err := openAPI(c, true)
			if err != nil {
				return err
			}
			defer s.Close()
			fmt.Fprintf(c.App.Writer, "create node/%s, through the API server's gate:\n", node.Name)
			created, err := s.client.Create(c.Context, node)
			if err != nil {
				return err
			}
			if _, err := apiserver.AddNodeUser(dir, node.Name); err != nil {
				return fmt.Errorf("adding the kubelet's identity: %w", err)
			}
			fmt.Fprintf(c.App.Writer, "node/%s created (resourceVersion %s): cpu %s, memory %s, pods %d\n",
				created.GetName(), created.GetResourceVersion(), c.String("cpu"), c.String("memory"), c.Int("pods"))
			pr, err := pki.IssueNode(pki.Options{Layout: statedir.Layout{Dir: dir}}, pki.Node{Name: node.Name, Hosts: pki.MachineHosts()})
			switch {
			case errors.Is(err, pki.ErrNoCA):
				fmt.Fprintf(c.App.Writer, "No cluster CA in %s yet: `podlab init` makes it, and the kubelet's certificates with it.\n", dir)
			case err != nil:
				return fmt.Errorf("issuing the kubelet's certificates: %w", err)
			default:
				for _, it := range append(pr.Certificates, pr.Kubeconfigs...) {
					fmt.Fprintf(c.App.Writer, "%s %s: %s%s\n", it.Action, it.Files[0], it.Purpose, because(it))
				}
			}
			fmt.Fprintf(c.App.Writer, "Its kubelet acts as system:node:%s (in the token file). It has not posted a status yet: podlab kubelet --node %s\n", node.Name, node.Name)
			return nil
		},
	}},
}

func nodeFromFlags(c *cli.Context) (*corev1.Node, error) {
	name := c.Args().First()
	capacity := corev1.ResourceList{}
	for flag, res := range map[string]corev1.ResourceName{"cpu": corev1.ResourceCPU, "memory": corev1.ResourceMemory} {
		q, err := resource.ParseQuantity(c.String(flag))
		if err != nil || q.Sign() <= 0 {
			return nil, fmt.Errorf("--%s %q: want a positive quantity, such as 2, 500m, 4Gi", flag, c.String(flag))
		}
		capacity[res] = q
	}
	if c.Int("pods") <= 0 {
		return nil, fmt.Errorf("--pods %d: a node must take at least one pod", c.Int("pods"))
	}
	capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(c.Int("pods")), resource.DecimalSI)
	// The labels a kubelet v1.37 puts on its Node (initialNode), the beta
	// ones included: kube-scheduler's default spreading reads the hostname.
	labels := map[string]string{
		"kubernetes.io/hostname":  name,
		"kubernetes.io/os":        "linux",
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	if l := c.String("labels"); l != "" {
		extra, err := parseLabels(l)
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			labels[k] = v
		}
	}
	taints, err := parseTaints(c.String("taints"))
	if err != nil {
		return nil, err
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
			}},
		},
	}, nil
}

// parseTaints reads key[=value]:Effect,...
func parseTaints(s string) ([]corev1.Taint, error) {
	if s == "" {
		return nil, nil
	}
	var out []corev1.Taint
	for _, t := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok || kv == "" {
			return nil, fmt.Errorf("taint %q: want key[=value]:Effect, such as gpu=true:NoSchedule", t)
		}
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taint %q: the effect must be NoSchedule, PreferNoSchedule or NoExecute", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// parseLabels reads k=v,k2=v2.
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: want key=value, such as app=web", kv)
		}
		out[k] = v
	}
	return out, nil
}

// cutEnv splits NAME=VALUE.
func cutEnv(s string) (string, string, bool) {
	k, v, ok := strings.Cut(s, "=")
	return k, v, ok && k != ""
}
