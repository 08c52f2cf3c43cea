package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/store"
)

// newAPIServerCommand is `podlab apiserver`: kube-apiserver, the gate as a
// network server.
func newAPIServerCommand() *cli.Command {
	return &cli.Command{
		Name:      "apiserver",
		Usage:     "run kube-apiserver: the Kubernetes REST API over HTTPS, in front of the gate and the store (steps 1-2)",
		ArgsUsage: "[--secure-port 6443] [--bind-address 127.0.0.1] [-v]",
		Description: `Every component of a cluster, kubectl included, talks to one process:
kube-apiserver. It is the only one that opens etcd; everything else sends it
HTTPS requests and watches it. This command is podlab's: it opens the store
of the state directory and serves the Kubernetes REST API with it, as a
real cluster serves it, until Ctrl-C (SIGINT) or SIGTERM.

  GET    /api/v1/namespaces/default/pods          list (labelSelector,
                                                  fieldSelector, limit, continue)
  GET    /api/v1/namespaces/default/pods?watch=1  watch: one JSON event a line
  POST   /api/v1/namespaces/default/pods          create
  GET|PUT|PATCH|DELETE .../pods/web               one object
  POST   .../pods/web/binding                     the scheduler's write
  PUT    .../pods/web/status                      the kubelet's write
  GET|PUT|PATCH /apis/apps/v1/.../deployments/web/scale

Each request goes through kube-apiserver's chain: authentication (a client
certificate, or a bearer token from <state-dir>/auth/tokens.csv; no
credentials at all make you system:anonymous, who may do almost nothing),
impersonation (kubectl --as, for users RBAC lets impersonate),
authorization (RBAC), admission, validation, storage. With -v, each phase
of each request is one line on stderr, prefixed by the request:

  POST /api/v1/namespaces/default/pods (admin): authorization [RBAC]: allowed by ...

Every error is a Kubernetes Status (401, 403, 404, 409, 422...) with
kube-apiserver's words, so kubectl prints "Error from server (Forbidden)"
as against any cluster. Try it with curl:

  curl --cacert <state-dir>/pki/ca.crt -H "Authorization: Bearer TOKEN" \
    https://127.0.0.1:6443/api/v1/namespaces/default/pods

kubectl logs and kubectl exec are pods/log and pods/exec: the API server
authorizes them (get pods/log, create pods/exec), finds the pod's node and
its kubelet's address and port in the Node's status, and proxies the
request there with its own client certificate
(<state-dir>/pki/apiserver-kubelet-client.crt, user
kube-apiserver-kubelet-client): see podlab kubelet --port.

The serving certificate is <state-dir>/pki/apiserver.crt (and .key), and
client certificates are those <state-dir>/pki/ca.crt signed: ` + "`podlab init`" + `
makes them.

Every new pod gets two tolerations from the DefaultTolerationSeconds
admission plugin: node.kubernetes.io/not-ready and
node.kubernetes.io/unreachable, NoExecute, for 300 seconds. When the node
lifecycle controller taints a silent node, the taint-eviction controller
deletes its pods once that time has passed, and their controllers make new
ones elsewhere. The lab sets it shorter to see it happen:

  podlab apiserver --default-unreachable-toleration-seconds 20

By default the store is the state directory's bbolt file. With
--etcd-servers it is a real etcd (start one with ` + "`podlab etcd`" + `), with
the keys and values kube-apiserver writes there, so that etcdctl shows
what it shows on a real cluster:

  podlab apiserver --etcd-servers http://127.0.0.1:2379
  etcdctl get /registry/pods/default/web --print-value-only | head -c 40 | od -c

Started before etcd, it says so and retries until etcd answers. As
kube-apiserver, it compacts etcd's history every
--etcd-compaction-interval (5 minutes): a watch from a revision older than
that gets 410 Gone, and its client lists again.

When the state directory has a lab network (podlab init chooses it), the
API server also listens on its gateway, at the same port: the address the
lab bridge has on the host, where the kubelets of joined nodes (podlab node
join), each in its own network namespace, reach it. It binds that address
with IP_FREEBIND, since the bridge appears only when the first node joins.

The flags are kube-apiserver's.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "secure-port", Value: pki.DefaultPort, EnvVars: []string{"PODLAB_APISERVER_PORT"}, Usage: "the HTTPS port, the one podlab init wrote into the kubeconfigs (0: any free port)"},
			&cli.StringFlag{Name: "bind-address", Value: "127.0.0.1", Usage: "the address to listen on"},
			&cli.StringFlag{Name: "tls-cert-file", Usage: "the serving certificate (default <state-dir>/pki/apiserver.crt)"},
			&cli.StringFlag{Name: "tls-private-key-file", Usage: "its key (default <state-dir>/pki/apiserver.key)"},
			&cli.StringFlag{Name: "client-ca-file", Usage: "the CA of client certificates (default <state-dir>/pki/ca.crt)"},
			&cli.StringFlag{Name: "kubelet-client-certificate", Usage: "the client certificate for calling kubelets: logs, exec (default <state-dir>/pki/apiserver-kubelet-client.crt)"},
			&cli.StringFlag{Name: "kubelet-client-key", Usage: "its key (default <state-dir>/pki/apiserver-kubelet-client.key)"},
			&cli.Int64Flag{Name: "default-not-ready-toleration-seconds", Value: admission.DefaultNotReadyTolerationSeconds, Usage: "the tolerationSeconds DefaultTolerationSeconds admission gives new pods for the node.kubernetes.io/not-ready:NoExecute taint"},
			&cli.Int64Flag{Name: "default-unreachable-toleration-seconds", Value: admission.DefaultUnreachableTolerationSeconds, Usage: "likewise for node.kubernetes.io/unreachable:NoExecute"},
			&cli.StringSliceFlag{Name: "etcd-servers", Usage: "store everything in etcd at these client URLs (http://127.0.0.1:2379) instead of the bbolt file"},
			&cli.StringFlag{Name: "etcd-prefix", Value: store.DefaultEtcdPrefix, Usage: "the prefix of every key in etcd"},
			&cli.DurationFlag{Name: "etcd-compaction-interval", Value: 5 * time.Minute, Usage: "how often to compact etcd's history (0: never)"},
			&cli.StringFlag{Name: "kubelet-certificate-authority", Usage: "the CA of the kubelets' serving certificates (default <state-dir>/pki/ca.crt)"},
		},
		Action: runAPIServer,
	}
}

func runAPIServer(c *cli.Context) error {
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return err
	}
	tolerations := admission.TolerationSeconds{
		NotReady:    c.Int64("default-not-ready-toleration-seconds"),
		Unreachable: c.Int64("default-unreachable-toleration-seconds"),
	}
	if err := tolerations.Validate(); err != nil {
		return err // before opening the store
	}
	cfg := rest.ServerConfig{
		BindAddress:       c.String("bind-address"),
		SecurePort:        c.Int("secure-port"),
		TLSCertFile:       flagOr(c, "tls-cert-file", l.PKICert("apiserver")),
		TLSPrivateKeyFile: flagOr(c, "tls-private-key-file", l.PKIKey("apiserver")),
		ClientCAFile:      flagOr(c, "client-ca-file", l.CACert()),
	}
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return err // before opening the store
	}
	lab, err := machine.LoadLab(l)
	switch {
	case err == nil:
		cfg.AlsoOn = []string{lab.Gateway.String()}
	case !errors.Is(err, machine.ErrNoLab):
		return err
	}
	release, err := rest.ClaimStore(l.APIServerLock())
	if err != nil {
		return err // one API server per store
	}
	defer release()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	storeName := store.Path(dir)
	var s *apiserver.Server
	if servers := c.StringSlice("etcd-servers"); len(servers) > 0 {
		cfg := store.EtcdConfig{Endpoints: servers, Prefix: c.String("etcd-prefix")}
		s, err = openEtcdRetrying(ctx, c, dir, cfg, apiserver.WithDefaultTolerationSeconds(tolerations))
		storeName = "etcd " + strings.Join(servers, ",") + " under " + c.String("etcd-prefix")
	} else {
		s, err = apiserver.Open(dir, apiserver.WithDefaultTolerationSeconds(tolerations))
	}
	if err != nil {
		return err
	}
	defer s.Close()
	go s.RunCompactor(ctx, c.Duration("etcd-compaction-interval"), func(rev int64, err error) {
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "compacting etcd to revision %d: %v\n", rev, err)
		} else if c.Bool("v") {
			fmt.Fprintf(c.App.ErrWriter, "compacted etcd's history up to revision %d\n", rev)
		}
	})
	var opts []rest.Option
	if c.Bool("v") {
		opts = append(opts, rest.LogPhases(c.App.ErrWriter))
	}
	kubelets, err := rest.KubeletTransport(
		flagOr(c, "kubelet-client-certificate", l.PKICert("apiserver-kubelet-client")),
		flagOr(c, "kubelet-client-key", l.PKIKey("apiserver-kubelet-client")),
		flagOr(c, "kubelet-certificate-authority", l.CACert()))
	switch {
	case err == nil:
		opts = append(opts, rest.WithKubeletTransport(kubelets))
	case errors.Is(err, rest.ErrNoKubeletClientCertificate) && !c.IsSet("kubelet-client-certificate"):
		// a state directory made before the certificate existed: the
		// API works, pods/log and pods/exec answer 503 with the hint
		fmt.Fprintf(c.App.ErrWriter, "warning: %v; kubectl logs and exec will fail\n", err)
	default:
		return err
	}
	h, err := rest.NewKubeAPIServer(s, tlsConfig.ClientCAs, opts...)
	if err != nil {
		return err
	}
	err = rest.ListenAndServe(ctx, cfg, h, func(addr string) {
		// podlab's own commands find this server through the claim
		if err := rest.Advertise(l.APIServerLock(), rest.URLFor(addr)); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "warning: %v (podlab get, run, ... will not find this server)\n", err)
		}
		fmt.Fprintf(c.App.Writer, "serving the Kubernetes API on https://%s (store %s); Ctrl-C stops\n", addr, storeName)
		if len(cfg.AlsoOn) > 0 {
			if _, port, err := net.SplitHostPort(addr); err == nil {
				fmt.Fprintf(c.App.Writer, "and on https://%s, the lab network's gateway (bridge %s), where joined nodes' kubelets reach it\n", net.JoinHostPort(lab.Gateway.String(), port), lab.Bridge)
			}
		}
	})
	if err == nil {
		fmt.Fprintln(c.App.Writer, "stopped")
	}
	return err
}

func flagOr(c *cli.Context, name, def string) string {
	if v := c.String(name); v != "" {
		return v
	}
	return def
}

// openEtcdRetrying opens the API server over etcd, and while etcd does not
// answer says so and tries again (every 2s), as kube-apiserver waits for
// its etcd, until it answers or ctx ends.
func openEtcdRetrying(ctx context.Context, c *cli.Context, dir string, cfg store.EtcdConfig, opts ...apiserver.Option) (*apiserver.Server, error) {
	for said := false; ; said = true {
		s, err := apiserver.OpenEtcd(ctx, dir, cfg, nil, opts...)
		if !errors.Is(err, store.ErrUnavailable) {
			return s, err
		}
		if !said {
			fmt.Fprintf(c.App.ErrWriter, "waiting for etcd: %v; retrying every 2s (Ctrl-C stops)\n", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd at %s never answered: %w", strings.Join(cfg.Endpoints, ","), store.ErrUnavailable)
		case <-time.After(2 * time.Second):
		}
	}
}
