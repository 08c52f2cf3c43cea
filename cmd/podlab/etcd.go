package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/etcd"
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

An object's resourceVersion is its key's mod_revision in etcd. The binary
is bin/etcd (make deps builds etcd 3.6 from the Go module proxy: Debian's
3.4 is older than Kubernetes v1.37 supports).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Value: etcd.DefaultClientPort, EnvVars: []string{"PODLAB_ETCD_PORT"}, Usage: "the client port; peers use the next one"},
			&cli.StringFlag{Name: "listen-address", Value: "127.0.0.1", Usage: "the address to listen on"},
			&cli.StringFlag{Name: "data-dir", Usage: "etcd's data (default <state-dir>/etcd/member-data)"},
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
	cmd, err := cfg.Command(ctx, bin)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = c.App.Writer, c.App.ErrWriter
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	fmt.Fprintf(c.App.Writer, "etcd %s: clients on %s, data in %s; Ctrl-C stops\n  podlab apiserver --etcd-servers %s\n",
		bin, cfg.ClientURL(), cfg.DataDir, cfg.ClientURL())
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
