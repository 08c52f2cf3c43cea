package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/etcd"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
)

// newEtcdCommand is `podlab etcd`: a real etcd for the lab, in the
// foreground.
func newEtcdCommand() *cli.Command {
	return &cli.Command{
		Name:      "etcd",
		Usage:     "run a real etcd, the store of every Kubernetes cluster, for podlab apiserver --etcd-servers",
		ArgsUsage: "[--port 2379]",
		Description: `A Kubernetes cluster keeps all of its state in etcd: a replicated
key-value store with revisions, watches and transactions. Only
kube-apiserver talks to it. podlab's API server keeps its state in a bbolt
file by default (bbolt is etcd's own storage engine, used in-process); this
command starts the real thing, one member, on loopback, in the foreground
until Ctrl-C:

  podlab etcd                      # data in <state-dir>/etcd/member-data
  podlab apiserver --etcd-servers http://127.0.0.1:2379

The API server lays its keys and values out in etcd as kube-apiserver does:
/registry/pods/default/web, nodes under /registry/minions (their name
before they were nodes), each value "k8s\x00" and a protobuf
runtime.Unknown. Look at them with etcdctl (built beside podlab by make
deps):

  etcdctl --endpoints http://127.0.0.1:2379 get /registry/namespaces --prefix --keys-only
  etcdctl --endpoints http://127.0.0.1:2379 get /registry/pods/default/web -w json

When the state directory has a lab network (podlab init chooses it),
etcd also listens for clients on its gateway, the lab bridge's address on
the host, as a control-plane host's etcd listens on the host's address
besides loopback: what a machine of the lab (podlab node join) sees the
host at. The bridge must exist for etcd to bind the address, so this
command makes it if no node has joined yet (podlab reset removes it);
--lab-network=false keeps etcd on loopback only.

An object's resourceVersion is its key's mod_revision in etcd. The binary
is bin/etcd (make deps builds etcd 3.6 from the Go module proxy: Debian's
3.4 is older than Kubernetes v1.37 supports).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Value: etcd.DefaultClientPort, EnvVars: []string{"PODLAB_ETCD_PORT"}, Usage: "the client port; peers use the next one"},
			&cli.StringFlag{Name: "listen-address", Value: "127.0.0.1", Usage: "the address to listen on"},
			&cli.StringFlag{Name: "data-dir", Usage: "etcd's data (default <state-dir>/etcd/member-data)"},
			&cli.BoolFlag{Name: "lab-network", Value: true, Usage: "also listen on the lab network's gateway, when the state directory has one"},
		},
		Action: runEtcd,
	}
}

func runEtcd(c *cli.Context) error {
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return err
	}
	data, err := filepath.Abs(flagOr(c, "data-dir", l.EtcdDataDir()))
	if err != nil {
		return err
	}
	cfg := etcd.Config{Name: "podlab", DataDir: data, Host: c.String("listen-address"), ClientPort: c.Int("port")}
	if err := cfg.Validate(); err != nil {
		return err // before looking for the binary
	}
	bin, err := etcd.Find()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lab, onLab, err := etcdLab(ctx, c, l, cfg.Host)
	if err != nil {
		return err
	}
	if onLab {
		cfg.AlsoOn = []string{lab.Gateway.String()}
	}
	cmd, err := cfg.Command(ctx, bin)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = c.App.Writer, c.App.ErrWriter
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	fmt.Fprintf(c.App.Writer, "etcd %s: clients on %s, data in %s; Ctrl-C stops\n", bin, cfg.ClientURL(), cfg.DataDir)
	if onLab {
		fmt.Fprintf(c.App.Writer, "and on %s, the lab network's gateway (bridge %s)\n", cfg.ClientURLs()[1], lab.Bridge)
	}
	fmt.Fprintf(c.App.Writer, "  podlab apiserver --etcd-servers %s\n", cfg.ClientURL())
	err = cmd.Run()
	var exit *exec.ExitError
	if ctx.Err() != nil && (err == nil || errors.As(err, &exit)) {
		fmt.Fprintln(c.App.Writer, "stopped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("etcd stopped: %w (is port %d or %d taken? try --port)", err, cfg.ClientPort, cfg.ClientPort+1)
	}
	return nil
}

// etcdLab is the lab network etcd listens on besides host, made on the
// host if no node made it yet; onLab is false when the state directory
// has none, --lab-network=false, or host is the gateway or every address.
func etcdLab(ctx context.Context, c *cli.Context, l statedir.Layout, host string) (lab machine.Lab, onLab bool, err error) {
	if !c.Bool("lab-network") {
		return lab, false, nil
	}
	lab, err = machine.LoadLab(l)
	if errors.Is(err, machine.ErrNoLab) {
		return lab, false, nil
	}
	if err != nil {
		return lab, false, err
	}
	if a, err := netip.ParseAddr(host); err == nil && (a.IsUnspecified() || a == lab.Gateway) {
		return lab, false, nil
	}
	made, err := machine.Up(ctx, lab)
	if err != nil {
		return lab, false, fmt.Errorf("making the lab network %s for etcd to listen on its gateway: %w (or podlab etcd --lab-network=false: loopback only)", lab.CIDR, err)
	}
	if made.Bridge {
		fmt.Fprintf(c.App.Writer, "made the lab bridge %s with the gateway %s (podlab reset removes it)\n", lab.Bridge, lab.Gateway)
	}
	return lab, true, nil
}
