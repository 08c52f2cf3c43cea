package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// newNodeLeaveCommand is `podlab node leave`: drain a joined node, delete
// it, and remove its machine.
func newNodeLeaveCommand() *cli.Command {
	return &cli.Command{
		Name:      "leave",
		Usage:     "drain a joined node, delete its Node, and remove its machine from the lab network",
		ArgsUsage: "NAME [--grace-period SECONDS] [--timeout 2m]",
		Description: `The way a node leaves a cluster, in order:

  1. drain    as kubectl drain --ignore-daemonsets --disable-eviction: cordon
              it (spec.unschedulable: the scheduler sends it nothing new),
              delete each of its pods but DaemonSet's, and wait until its
              kubelet has stopped them and they are gone; their
              controllers make new ones on other nodes
  2. machine  stop what still runs in the node's network namespace (its
              kubelet: SIGTERM, then SIGKILL), remove the veth pair (eth0
              and its route go with it), unmount and remove the namespace;
              the last node to leave takes the lab bridge and its iptables
              chains and rules with it
  3. delete   the Node object, once its kubelet is stopped (a running
              kubelet would register it again), as after kubeadm reset

The node's kubeconfig names the API server on the host again, so its
kubelet can still run as before it joined.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "grace-period", Value: -1, Usage: "seconds each pod has to stop (-1: the pod's own terminationGracePeriodSeconds; 0: deleted at once)"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "how long to wait for the pods to go"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("podlab node leave needs one name: podlab node leave node-2")
			}
			name := c.Args().First()
			if err := machine.CheckNodeName(name); err != nil {
				return err
			}
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			l := statedir.Layout{Dir: dir}
			if _, err := machine.Load(l.Node(name)); err != nil {
				return fmt.Errorf("podlab node leave %s: %w", name, err)
			}
			w := c.App.Writer
			s, err := openAPI(c, true)
			if err != nil {
				return err
			}
			defer s.Close()
			opts := kubectl.DrainOptions{
				Timeout: c.Duration("timeout"),
				OnPod:   func(pod, what string) { fmt.Fprintf(w, "pod/%s %s\n", pod, what) },
			}
			if g := int64(c.Int("grace-period")); g >= 0 {
				opts.GracePeriodSeconds = &g
			}
			res, err := kubectl.Drain(c.Context, s.client, name, opts)
			if res != nil && res.Cordoned {
				fmt.Fprintf(w, "node/%s cordoned\n", name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "node/%s drained\n", name)
			left, lerr := machine.Leave(c.Context, l, name, 10*time.Second)
			if left != nil {
				if len(left.Stopped) > 0 {
					fmt.Fprintf(w, "stopped what ran in its machine: pids %v\n", left.Stopped)
				}
				fmt.Fprintf(w, "removed the veth %s (and eth0 %s with it) and the network namespace %s\n", left.Machine.HostVeth, left.Machine.Address, left.Machine.Netns)
				if left.LabDown {
					fmt.Fprintf(w, "the last machine left: removed the lab bridge %s and its iptables rules\n", left.Machine.Bridge)
				}
			}
			_, err = s.client.Delete(c.Context, "nodes", "", name, apiserver.DeleteOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("deleting node %s: %w", name, err)
			default:
				fmt.Fprintf(w, "node/%s deleted\n", name)
			}
			if lerr != nil {
				return lerr
			}
			// its kubeconfig names the API server on the host again
			if _, err := pki.IssueNode(pki.Options{Layout: l}, pki.Node{Name: name, Hosts: pki.MachineHosts()}); err != nil && !errors.Is(err, pki.ErrNoCA) {
				return fmt.Errorf("pointing node %s's kubeconfig back at the host: %w", name, err)
			}
			return nil
		},
	}
}
