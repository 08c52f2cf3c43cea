package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

var resetCommand = &cli.Command{
	Name:      "reset",
	Usage:     "remove everything podlab made under the state directory: containers, mounts, cgroups, the store, the content stores",
	ArgsUsage: "[--yes] [--all]",
	Description: `podlab reset takes a state directory back to nothing, as tearing a cluster
down does (kubeadm reset, kind delete cluster), in the order the pieces
depend on each other:

  0. machines    each joined node's machine (podlab node join): what runs
                 in its network namespace is stopped (its kubelet), its veth
                 and namespace removed; then the lab bridge and its iptables
                 chains and rules
  0b. containerd the lab containerd (podlab containerd): containerd and its
                 shims stopped, CNI DEL of its pods (their results in
                 /var/lib/cni/results), its containers deleted from its runc
                 root, its shims' sockets in /run/containerd/s removed, its
                 bridge (plc<hash>) deleted
  1. containers  every container runc knows under the state directory, the
                 top-level runc root (podlab runc create) and every node's
                 (the kubelets'): runc delete --force kills it and removes
                 its state and cgroup; the shim leaves with it
  2. network     every pod each node's runtime attached to its pod network:
                 CNI DEL from libcni's cache (nodes/*/cni/cache), which
                 removes its veth and port mappings and releases its IP;
                 then the node's bridge (plb<hash>, named after the state
                 directory and the node). The shared iptables chains of the
                 portmap and firewall plugins in the host's namespace stay
  3. mounts      the pods' namespace files, nodes/*/{netns,ipcns,utsns}/<uid>,
                 are bind mounts: unmounted first (a namespace lives as long
                 as a process or a mount holds it)
  4. cgroups     the empty cgroups under /podlab, in every hierarchy (cgroup
                 v1 controllers and v2/unified): rmdir is the only way to
                 remove a cgroup, and one with processes in it stays
  5. files       the store (etcd/), the tokens (auth/), the content stores
                 (content/, nodes/*/content), bundles, runc roots, the
                 registry's blobs, the node directories, containerd/ and
                 certs.d/

The demo images (demo-images/) and the .deb cache (cache/) stay, since they
take a while to make again: --all removes them too. Anything else in the
directory is left alone. A directory with none of etcd/, nodes/, content/, containerd/
inside is not podlab's, and is refused. So is a reset while a podlab
apiserver serves the directory's store (stop it first, as kube-apiserver
before kubeadm reset): reset holds the API server's claim on the store
(etcd/apiserver.lock) until it is done.

It asks first, unless --yes.

Examples:
  podlab reset
  podlab reset --yes && podlab up`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask"},
		&cli.BoolFlag{Name: "all", Usage: "remove the demo images and the .deb cache too"},
		&cli.StringFlag{Name: "runtime", Usage: "the OCI runtime binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 0 {
			return fmt.Errorf("reset takes no arguments (got %q): the state directory is --state-dir", c.Args().Slice())
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		if err := up.CheckStateDir(dir); err != nil {
			return err
		}
		// Hold the API server's claim on the store while resetting: none
		// may serve a store that is being removed, nor start meanwhile.
		if lock := (statedir.Layout{Dir: dir}).APIServerLock(); dirExists(filepath.Dir(lock)) {
			release, err := rest.ClaimStore(lock)
			if err != nil {
				return fmt.Errorf("resetting %s: %w", dir, err)
			}
			defer release()
		}
		w := c.App.Writer
		if !c.Bool("yes") {
			fmt.Fprintf(w, "Remove everything under %s? [y/N] ", dir)
			answer, _ := bufio.NewReader(c.App.Reader).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				fmt.Fprintln(w, "Nothing removed.")
				return nil
			}
		}
		bin, err := runc.FindRuntime(c.String("runtime"))
		if err != nil {
			return err
		}
		opts := up.ResetOptions{StateDir: dir, All: c.Bool("all"), Runtime: bin}
		if c.Bool("debug") {
			opts.OnCommand = traceTo(w)
		}
		res, err := up.Reset(c.Context, opts)
		if res != nil {
			printReset(c, dir, res)
		}
		return err
	},
}

func printReset(c *cli.Context, dir string, res *up.ResetResult) {
	w := c.App.Writer
	section := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", title)
		for _, i := range items {
			fmt.Fprintf(w, "  %s\n", i)
		}
	}
	section("Removed machines (joined nodes: processes stopped, veth and network namespace removed)", res.Machines)
	if res.Lab != "" {
		fmt.Fprintf(w, "Removed the lab network %s\n", res.Lab)
	}
	section("Stopped the nodes' runtimes (podlab runtime)", res.Runtimes)
	section("The lab containerd (podlab containerd)", res.Containerd)
	section("Deleted containers (runc delete --force: killed, state and cgroup removed)", res.Containers)
	section("Stopped pause processes (the CRI sandboxes' PID 1)", res.Pauses)
	section("Pod network", res.Network)
	section("Unmounted", res.Unmounted)
	if len(res.Cgroups) > 0 {
		fmt.Fprintf(w, "Removed cgroups: %s\n", kubelet.CgroupSummary(res.Cgroups))
	}
	section("Cgroups left under "+statedir.Layout{Dir: dir}.CgroupRoot()+" (processes still in them: started outside podlab's runc roots?)", res.BusyCgroups)
	section("Removed", res.Removed)
	section("Kept", res.Kept)
	if len(res.Runtimes)+len(res.Containerd)+len(res.Containers)+len(res.Pauses)+len(res.Network)+len(res.Unmounted)+len(res.Cgroups)+len(res.Removed) == 0 {
		fmt.Fprintf(w, "Nothing of podlab's was left under %s.\n", dir)
		return
	}
	fmt.Fprintf(w, "%s is reset: podlab up starts over.\n", dir)
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
