package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/store"
)

func newInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "make the control plane's store, users, CA, certificates and kubeconfigs: what kubeadm init's first phases do",
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
  pki/              the cluster's PKI, as kubeadm's /etc/kubernetes/pki
  kubeconfigs/      one kubeconfig per identity

The PKI is how the parts of a cluster know each other, as in Kubernetes the
Hard Way's "Provisioning a CA and Generating TLS Certificates". Every
connection is TLS, and one certificate authority signs every certificate:

  ca.crt, ca.key            the cluster CA, which every component trusts (10 years)
  apiserver.crt             the API server's serving certificate: clients check
                            they talk to the API server (SANs 127.0.0.1, ::1,
                            localhost, this host's name and address, the lab
                            network's gateway, kubernetes, kubernetes.default...,
                            and 10.96.0.1, the ClusterIP of the kubernetes Service)
  apiserver-kubelet-client.crt  the API server's client certificate, for
                            calling kubelets (kubectl logs, exec)
  admin.crt, kube-scheduler.crt, kube-controller-manager.crt, developer.crt,
  viewer.crt, node-1.crt    client certificates: the subject IS the identity,
                            its CN the user and its O the groups (CN=admin,
                            O=system:masters; CN=system:node:node-1,
                            O=system:nodes)
  kubelet-node-1.crt        the kubelet's serving certificate, for its own API

Keys are RSA 2048, kubeadm's default, mode 0600; certificates are made as
kubeadm makes them, valid from five minutes before for one year (the CA
ten). Each
kubeconfig (admin.kubeconfig, node-1.kubeconfig, ...) names the cluster
podlab at https://127.0.0.1:6443 (--apiserver-port), embeds ca.crt and the
identity's certificate and key, as kubeadm's admin.conf, and is what
kubectl --kubeconfig and the components' --kubeconfig read. See it with
openssl x509 -in pki/admin.crt -noout -subject -issuer.

The users: admin (group system:masters, bound to cluster-admin), developer
(may edit the default namespace), viewer (may only read), and the
components' own identities: system:kube-scheduler,
system:kube-controller-manager and system:node:node-1, the kubelet of the
node this machine plays. Each has a token in the token file too: the API
server asks for a client certificate first, then a bearer token.

Then it writes what kube-apiserver writes when it first starts, with its own
loopback identity: the namespaces default, kube-system, kube-public and
kube-node-lease, and the default RBAC policy (ClusterRoles cluster-admin,
admin, edit, view and the components' roles, and their bindings).

It names the lab registry (podlab registry serve, http://127.0.0.1:5001) as
the mirror of docker.io and registry.k8s.io in certs.d/<host>/hosts.toml, as
containerd's config_path, unless those files are there already: podlab pull
and podlab containerd read them.

It also chooses the lab network, once, and records it in lab/network.json:
the network nodes are on when they join as machines of their own (podlab
node join), a private /24 of 172.16.0.0/12 derived from the state directory
(the next free one if the host has that network already), or --lab-cidr /
PODLAB_LAB_CIDR; one that overlaps a network of the host is refused. Its
gateway (.1) is the host on that network, where podlab apiserver listens too.

Run again, it keeps every token, object, the CA and every certificate that
is still good, and adds only what is missing: it re-issues a certificate
only when it is missing, damaged, within 30 days of its end, or lacks a SAN
now wanted, and says so. Any command can then act as any user: --as
developer, or --token TOKEN.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "apiserver-port", Value: pki.DefaultPort, EnvVars: []string{"PODLAB_APISERVER_PORT"}, Usage: "the API server's port the kubeconfigs name (a new init keeps theirs unless this is set)"},
			&cli.StringFlag{Name: "lab-cidr", EnvVars: []string{machine.EnvCIDR}, Usage: "the lab network joined nodes are on, a private /16 to /28 (default: a /24 of 172.16.0.0/12 chosen by the state directory's hash); chosen once, kept until podlab reset"},
		},
		Action: func(c *cli.Context) error {
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			if p := c.Int("apiserver-port"); p < 1 || p > 65535 {
				return fmt.Errorf("--apiserver-port %d: want a TCP port, 1 to 65535 (kube-apiserver's is 6443)", p)
			}
			res, err := apiserver.Init(c.Context, dir)
			if err != nil {
				return err
			}
			l := statedir.Layout{Dir: dir}
			lab, made, err := machine.EnsureLab(l, c.String("lab-cidr"))
			if err != nil {
				return fmt.Errorf("choosing the lab network: %w", err)
			}
			printInit(c.App.Writer, dir, res)
			printLab(c.App.Writer, l, lab, made)
			nodes, err := labNodes(l, lab, res.Users)
			if err != nil {
				return err
			}
			opts := pki.Options{Layout: l, APIServerHosts: append(pki.MachineHosts(), lab.Gateway.String()), Nodes: nodes}
			if c.IsSet("apiserver-port") {
				opts.Server = pki.ServerURL(c.Int("apiserver-port"))
			}
			pr, err := pki.Ensure(opts)
			if err != nil {
				return fmt.Errorf("making the cluster's PKI: %w", err)
			}
			printPKI(c.App.Writer, pr)
			if err := initMirrors(c.App.Writer, l); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, "\nNext: podlab run web --image nginx (lessons/02-apiserver.md)")
			return nil
		},
	}
}

// defaultMirror is where `podlab registry serve` listens unless --addr
// says otherwise.
const defaultMirror = "http://127.0.0.1:5001"

// initMirrors names the lab registry at its default address as the mirror
// of docker.io and registry.k8s.io (certs.d/<host>/hosts.toml), unless a
// hosts.toml is there already: `podlab registry serve` rewrites them with
// the address it really listens on, and init must not undo that.
func initMirrors(w io.Writer, l statedir.Layout) error {
	if pathExists(pull.HostsFile(l.CertsDir(), "docker.io")) {
		return nil
	}
	hosts, err := containerd.WriteHosts(l.CertsDir(), defaultMirror)
	if err != nil {
		return fmt.Errorf("naming the lab registry as the registries' mirror: %w", err)
	}
	fmt.Fprintf(w, "\nRegistry mirrors (containerd's config_path; podlab pull reads them): the lab registry,\n")
	fmt.Fprintf(w, "%s (podlab registry serve), before Docker Hub and registry.k8s.io:\n", defaultMirror)
	for _, h := range hosts {
		fmt.Fprintf(w, "  %s\n", h)
	}
	return nil
}

// labNodes are the nodes the lab knows: the kubelets of the token file
// (node-1, and those `podlab node add` or join added), each on this
// machine, or on its own machine on the lab network if it joined: then its
// serving certificate names its address there, and its kubeconfig the API
// server at the lab gateway.
func labNodes(l statedir.Layout, lab machine.Lab, users []authn.Entry) ([]pki.Node, error) {
	var out []pki.Node
	for _, e := range users {
		name, ok := strings.CutPrefix(e.User.Name, pki.NodeUserPrefix)
		if !ok {
			continue
		}
		m, err := machine.Load(l.Node(name))
		switch {
		case errors.Is(err, machine.ErrNotJoined):
			out = append(out, pki.Node{Name: name, Hosts: pki.MachineHosts()})
		case err != nil:
			return nil, err
		default:
			out = append(out, joinedNode(m, lab))
		}
	}
	return out, nil
}

// joinedNode is a joined node's PKI: its kubelet serves on its lab address
// and reaches the API server at the gateway.
func joinedNode(m machine.Machine, lab machine.Lab) pki.Node {
	return pki.Node{Name: m.Node, Hosts: []string{m.IP().String()}, ServerHost: lab.Gateway.String()}
}

// printLab says which lab network the state directory has.
func printLab(w io.Writer, l statedir.Layout, lab machine.Lab, made bool) {
	how := "kept"
	if made {
		how = "chosen"
	}
	fmt.Fprintf(w, "\nlab network (%s, recorded in %s): %s, gateway %s on the bridge %s, the bridge comes with the first node that joins (podlab node join NAME); the API server listens on the gateway too\n",
		how, l.LabRecord(), lab.CIDR, lab.Gateway, lab.Bridge)
}

func printInit(w io.Writer, dir string, res *apiserver.InitResult) {
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
}

// printPKI narrates what pki.Ensure made and kept.
func printPKI(w io.Writer, res *pki.Result) {
	fmt.Fprintf(w, "\nThe cluster's PKI in %s (as kubeadm's /etc/kubernetes/pki; each NAME.crt has its NAME.key, mode 0600):\n", res.PKIDir)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, it := range res.Certificates {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", it.Action, filepath.Base(it.Files[0]), it.Subject, it.Purpose, because(it))
	}
	tw.Flush()
	for _, it := range res.Certificates {
		if it.Name == "apiserver" {
			if kp, err := pki.LoadKeyPair(it.Files[0], it.Files[1]); err == nil {
				fmt.Fprintf(w, "The API server's certificate is valid until %s for: %s\n", kp.Cert.NotAfter.Format(time.DateOnly), strings.Join(pki.SANs(kp.Cert), ", "))
			}
		}
	}
	fmt.Fprintf(w, "\nKubeconfigs in %s (cluster %s at %s, the CA, the certificate and key embedded; use: kubectl --kubeconfig FILE):\n", res.KubeconfigsDir, pki.ClusterName, res.Server)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, it := range res.Kubeconfigs {
		fmt.Fprintf(tw, "  %s\t%s\tcontext %s%s\n", it.Action, filepath.Base(it.Files[0]), pki.ContextName(it.Subject), because(it))
	}
	tw.Flush()
}

func because(it pki.Item) string {
	if it.Reason == "" {
		return ""
	}
	return " (" + it.Reason + ")"
}
