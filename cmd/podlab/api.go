package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
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

// kubeconfigFlag is a component's --kubeconfig: talk to a running `podlab
// apiserver` over HTTPS, as its own identity, instead of opening the store.
func kubeconfigFlag(identity string) cli.Flag {
	return &cli.StringFlag{
		Name:  "kubeconfig",
		Usage: "reach `podlab apiserver` over HTTPS with this kubeconfig (podlab init wrote <state-dir>/kubeconfigs/" + identity + ".kubeconfig); without it, the component opens the store in-process",
	}
}

// componentClient is a component's way to the API server: over the network
// with --kubeconfig (the client certificate in it says who the component
// is), else in-process as defaultUser. done ends it.
func componentClient(c *cli.Context, defaultUser string) (client apiserver.Interface, done func() error, err error) {
	if kc := c.String("kubeconfig"); kc != "" {
		rc, err := remote.FromKubeconfig(kc)
		if err != nil {
			return nil, nil, err
		}
		return rc, func() error { return nil }, nil
	}
	s, err := openAPIAs(c, false, defaultUser)
	if err != nil {
		return nil, nil, err
	}
	return s.client, s.Close, nil
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
	// writes are recorded in managedFields as podlab-COMMAND, as kubectl's
	// are as kubectl-create, kubectl-run...
	opts := []apiserver.ClientOption{apiserver.WithFieldManager("podlab-" + c.Command.Name)}
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
