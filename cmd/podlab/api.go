package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/store"
)

// The global flags that say who is asking the API server, and how much of
// its gate to show. They may come before or after the subcommand.
func apiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:    "as",
			Usage:   "act as USER from the token file (admin, developer, viewer, system:kube-scheduler, ...); default admin",
			EnvVars: []string{"PODLAB_AS"},
		},
		&cli.StringFlag{
			Name:    "token",
			Usage:   "send this bearer token to the API server (see <state-dir>/auth/tokens.csv)",
			EnvVars: []string{"PODLAB_TOKEN"},
		},
		&cli.BoolFlag{
			Name:    "v",
			Aliases: []string{"verbose"},
			Usage:   "narrate every phase of the API server's gate, with what each decided",
		},
	}
}

// namespaceFlags are kubectl's -n and -A.
func namespaceFlag() cli.Flag {
	return &cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: "the namespace (default: default)"}
}

func allNamespacesFlag() cli.Flag {
	return &cli.BoolFlag{Name: "all-namespaces", Aliases: []string{"A"}, Usage: "every namespace"}
}

// apiSession is an opened API server and a client of it, for one command.
type apiSession struct {
	server *apiserver.Server
	client *apiserver.Client
}

func (s *apiSession) Close() error { return s.server.Close() }

// kubeconfigFlag is a component's --kubeconfig: the file with the API
// server's URL, the CA to trust and the client certificate that says who
// the component is. The default is the one `podlab init` wrote for it.
func kubeconfigFlag(identity string) cli.Flag {
	return &cli.StringFlag{
		Name:  "kubeconfig",
		Usage: "reach `podlab apiserver` over HTTPS with this kubeconfig (default <state-dir>/kubeconfigs/" + identity + ".kubeconfig, which podlab init wrote)",
	}
}

// componentKubeconfig is the kubeconfig a component uses: --kubeconfig,
// else the state directory's file of the identity --as names (system:node:NAME
// is NAME's, system:kube-scheduler kube-scheduler's...), else identity's.
func componentKubeconfig(c *cli.Context, identity string) (string, error) {
	if kc := c.String("kubeconfig"); kc != "" {
		return kc, nil
	}
	if c.String("token") != "" {
		return "", errors.New("--token: the components authenticate with the client certificate of a kubeconfig, not a token: pass --kubeconfig FILE, or --as USER for <state-dir>/kubeconfigs/USER.kubeconfig")
	}
	dir, err := stateDir(c)
	if err != nil {
		return "", err
	}
	if as := c.String("as"); as != "" {
		identity = strings.TrimPrefix(strings.TrimPrefix(as, pki.NodeUserPrefix), "system:")
	}
	return statedir.Layout{Dir: dir}.Kubeconfig(identity), nil
}

// componentClient is a component's client of `podlab apiserver`, over
// HTTPS with its kubeconfig (componentKubeconfig): components never open
// the store. A component that runs once fails at once when no API server
// answers, with the fix; a long-running one (wait) says once that it is
// waiting, waits with client-go's back-off, and later, whenever the API
// server goes away, says so once and resumes its watches when it is back.
func componentClient(c *cli.Context, identity string, wait bool) (*remote.Client, error) {
	kc, err := componentKubeconfig(c, identity)
	if err != nil {
		return nil, err
	}
	var opts []remote.Option
	if wait {
		w := c.App.Writer
		var host string
		opts = append(opts, remote.WithReconnect(func(err error) {
			if err != nil {
				fmt.Fprintf(w, "waiting for the API server at %s: it does not answer; trying again with back-off (start it with: podlab apiserver &)\n", host)
			} else {
				fmt.Fprintf(w, "the API server at %s answers: resuming\n", host)
			}
		}))
		rc, err := remote.FromKubeconfig(kc, opts...)
		if err != nil {
			return nil, err
		}
		host = rc.Host()
		return rc, rc.WaitForServer(c.Context)
	}
	rc, err := remote.FromKubeconfig(kc)
	if err != nil {
		return nil, err
	}
	if err := rc.Ping(c.Context); err != nil {
		return nil, unreachable(rc.Host(), kc, err)
	}
	return rc, nil
}

// unreachable says that no API server answers at host, why, and what to
// do; it wraps remote.ErrUnreachable (or the status error, if any).
func unreachable(host, kubeconfig string, err error) error {
	why := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		why = ue.Err.Error() // dial tcp ...: connection refused
	}
	if !errors.Is(err, remote.ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w at %s (kubeconfig %s): %s\nstart it with `podlab apiserver &` (lessons/02-apiserver.md), or pass the kubeconfig of the API server that runs (--kubeconfig)", remote.ErrUnreachable, host, kubeconfig, why)
}

// openAPI opens the API server of the state dir and a client for the user
// the global flags name. Writes print each phase of the gate as it
// happens; reads print them with -v (to stderr, so that -o yaml stays
// clean).
func openAPI(c *cli.Context, write bool) (*apiSession, error) {
	return openAPIAs(c, write, "admin")
}

// openAPIAs is openAPI for a component with its own identity (the
// scheduler's system:kube-scheduler, a kubelet's system:node:NAME):
// defaultUser is used unless --as or --token says otherwise. Components
// print their own lines, so no phase is printed unless -v.
func openAPIAs(c *cli.Context, write bool, defaultUser string) (*apiSession, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	stderr := c.App.ErrWriter
	notice := store.WithWaitNotice(func(time.Duration) {
		fmt.Fprintln(stderr, "waiting for the store: another podlab process holds its lock ...")
	})
	srv, err := apiserver.OpenWith(dir, []store.Option{notice})
	if err != nil {
		return nil, err
	}
	var opts []apiserver.ClientOption
	verbose := c.Bool("v")
	switch {
	case write:
		opts = append(opts, apiserver.WithPhases(phasePrinter(c.App.Writer, verbose)))
	case verbose:
		opts = append(opts, apiserver.WithPhases(phasePrinter(stderr, true)))
	}
	var client *apiserver.Client
	switch {
	case c.String("token") != "":
		client = srv.Client(c.String("token"), opts...)
	default:
		user := c.String("as")
		if user == "" {
			user = defaultUser
		}
		if client, err = srv.ClientAs(user, opts...); err != nil {
			srv.Close()
			return nil, fmt.Errorf("--as %s: %w", user, err)
		}
	}
	return &apiSession{server: srv, client: client}, nil
}

// phasePrinter prints one line per phase of the gate:
//
//	authentication        token file: bearer token -> user "admin" (...)
//
// and, when verbose, what each phase looked at or changed.
func phasePrinter(w io.Writer, verbose bool) func(apiserver.Phase) {
	return func(p apiserver.Phase) {
		what := p.Summary
		if p.Plugin != "" {
			what = p.Plugin + ": " + what
		}
		fmt.Fprintf(w, "  %-21s %s\n", p.Name, what)
		if verbose {
			for _, d := range p.Details {
				fmt.Fprintf(w, "  %-21s   - %s\n", "", d)
			}
		}
	}
}

// namespaceOf is -n, or "" when -A asks for every namespace.
func namespaceOf(c *cli.Context) string {
	if c.Bool("all-namespaces") {
		return ""
	}
	if ns := c.String("namespace"); ns != "" {
		return ns
	}
	return apiserver.DefaultNamespace
}

// kindName is "pod/web", as kubectl names an object in its messages.
func kindName(obj apiserver.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if res, err := apiserver.ResourceOf(obj); kind == "" && err == nil {
		kind = res.Kind
	}
	return strings.ToLower(kind) + "/" + obj.GetName()
}

// podFlag, with containerFlag and namespaceFlag, turns a runtime command
// into one stage of a kubelet's work on a pod: podlab pull --pod web does
// what the kubelet of web's node would do, and records it in the pod's
// status and events (lessons: walking a pod by hand).
func podFlag() cli.Flag {
	return &cli.StringFlag{Name: "pod", Usage: "do this stage for `POD` as its node's kubelet would, and record it in the pod's status"}
}

func containerFlag() cli.Flag {
	return &cli.StringFlag{Name: "container", Aliases: []string{"c"}, Usage: "with --pod: the container (default: the one whose stage this is)"}
}

// count is "1 image", "2 images", "1 pass", "5 passes".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
