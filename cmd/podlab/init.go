package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/store"
)

var initCommand = &cli.Command{
	Name:  "init",
	Usage: "make the control plane's store and users: what starting kube-apiserver for the first time does",
	Description: `Before "kubectl run" can reach anything, a cluster needs an API server with a
store behind it and a way to tell who is asking. podlab init makes both in
the state directory:

  etcd/store.db     the store, etcd's role: a bbolt file holding every
                    object under /registry/<resource>/<namespace>/<name>,
                    in protobuf as kube-apiserver writes it
  etcd/store.db.wal its write-ahead log, as etcd keeps one: each write is
                    fsync'd there before it is acknowledged
  auth/tokens.csv   a static token file (kube-apiserver --token-auth-file):
                    token,user,uid,"groups" per line, mode 0600

The users: admin (group system:masters, bound to cluster-admin), developer
(may edit the default namespace), viewer (may only read), and the
components' own identities: system:kube-scheduler,
system:kube-controller-manager and system:node:node-1, the kubelet of the
node this machine plays.

Then it writes what kube-apiserver writes when it first starts, with its own
loopback identity: the namespaces default, kube-system, kube-public and
kube-node-lease, and the default RBAC policy (ClusterRoles cluster-admin,
admin, edit, view and the components' roles, and their bindings).

Run again, it keeps every token and object and adds only what is missing.
Any command can then act as any user: --as developer, or --token TOKEN.`,
	Action: func(c *cli.Context) error {
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		res, err := apiserver.Init(c.Context, dir)
		if err != nil {
			return err
		}
		w := c.App.Writer
		if res.Existing {
			fmt.Fprintf(w, "The control plane of %s exists already; kept its tokens and objects.\n", dir)
		}
		fmt.Fprintf(w, "store (etcd's role):  %s (revision %d)\n", res.StorePath, res.Revision)
		fmt.Fprintf(w, "write-ahead log:      %s (each write is fsync'd here first, as in etcd's WAL)\n", store.WALPath(res.StorePath))
		fmt.Fprintf(w, "token file:           %s\n\n", res.TokenPath)
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "USER\tGROUPS\tACT AS IT WITH")
		for _, e := range res.Users {
			groups := "-"
			if len(e.User.Groups) > 0 {
				groups = fmt.Sprint(e.User.Groups)
			}
			fmt.Fprintf(tw, "%s\t%s\t--as %s\n", e.User.Name, groups, e.User.Name)
		}
		tw.Flush()
		if len(res.Created) > 0 {
			fmt.Fprintf(w, "\nWrote %d objects, as kube-apiserver does at its first start:\n", len(res.Created))
			for _, k := range res.Created {
				fmt.Fprintf(w, "  %s\n", k)
			}
		}
		fmt.Fprintln(w, "\nNext: podlab run web --image nginx (lessons/02-apiserver.md)")
		return nil
	},
}
