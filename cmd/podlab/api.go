package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/apiserver/rest"
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
			Usage:   "act as USER from the token file (admin, developer, viewer, system:kube-scheduler, ...); default admin. With podlab apiserver running: impersonation, as kubectl --as",
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
			Usage:   "narrate every phase of the API server's gate, with what each decided (with podlab apiserver running: each HTTPS request, as kubectl -v=6; the phases are in the server's log)",
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

// apiSession is one command's way to the API server: over HTTPS when a
// podlab apiserver serves the state directory, else the gate opened
// in-process on the store.
type apiSession struct {
	// server is the gate opened in-process; nil over the network.
	server *apiserver.Server
	// client is what the command calls: *apiserver.Client in-process, a
	// *networkClient over HTTPS. Both answer "may I?" (reviewer).
	client interface {
		apiserver.Interface
		reviewer
	}
}

// reviewer answers kubectl auth can-i: may the client's user do this, and
// what may it do in a namespace.
type reviewer interface {
	Access(ctx context.Context, verb, resource, subresource, namespace, name string) (authn.User, rbac.Decision, error)
	Rules(ctx context.Context, namespace string) (authn.User, []rbacv1.PolicyRule, error)
}

func (s *apiSession) Close() error {
	if s.server == nil {
		return nil
	}
	return s.server.Close()
}

// kubeconfigFlag is a component's --kubeconfig: the file with the API
// server's URL, the CA to trust and the client certificate that says who
// the component is. The default is the one `podlab init` wrote for it.
func kubeconfigFlag(identity string) cli.Flag {
	return &cli.StringFlag{
		Name:  "kubeconfig",
		Usage: "reach `podlab apiserver` over HTTPS with this kubeconfig (default <state-dir>/kubeconfigs/" + identity + ".kubeconfig, which podlab init wrote)",
	}
}

// kubeAPIRateFlags are a component's --kube-api-qps and --kube-api-burst:
// client-go's client-side rate limit on the requests it sends to the API
// server (a token bucket: qps a second once a burst is spent). client-go's
// own default, 5 a second after 10, makes a busy component wait on itself:
// the scheduler writes a binding and an event per pod, so 50 pods would
// take it 20 s. Each Kubernetes component sets its own, and these are
// their defaults: kube-scheduler 50 and 100, kube-controller-manager 20
// and 30, the kubelet 50 and 100 (kubeAPIQPS, kubeAPIBurst).
func kubeAPIRateFlags(qps float64, burst int) []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "kube-api-qps", Value: qps, Usage: "requests a second this component sends to the API server, once its burst is spent (client-go's client-side rate limit; negative: no limit)"},
		&cli.IntFlag{Name: "kube-api-burst", Value: burst, Usage: "requests this component may send at once before --kube-api-qps holds it back"},
	}
}

// kubeAPIRate is the client-side rate limit of --kube-api-qps and
// --kube-api-burst; zero values (a command without these flags) leave
// client-go's default.
type kubeAPIRate struct {
	QPS   float32
	Burst int
}

func kubeAPIRateOf(c *cli.Context) (kubeAPIRate, error) {
	r := kubeAPIRate{QPS: float32(c.Float64("kube-api-qps")), Burst: c.Int("kube-api-burst")}
	if r.Burst < 0 {
		return r, fmt.Errorf("--kube-api-burst %d: a burst is a number of requests, 0 or more", r.Burst)
	}
	if r.QPS > 0 && r.Burst == 0 {
		return r, fmt.Errorf("--kube-api-qps %g with --kube-api-burst 0 would let no request through: give a burst of at least 1 (or --kube-api-qps -1 for no limit)", r.QPS)
	}
	return r, nil
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
	rate, err := kubeAPIRateOf(c)
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
		rc, err := newComponentClient(kc, identity, rate, opts...)
		if err != nil {
			return nil, err
		}
		host = rc.Host()
		return rc, rc.WaitForServer(c.Context)
	}
	rc, err := newComponentClient(kc, identity, rate)
	if err != nil {
		return nil, err
	}
	if err := rc.Ping(c.Context); err != nil {
		return nil, unreachable(rc.Host(), kc, err)
	}
	return rc, nil
}

// newComponentClient is the client of kubeconfig, with the User-Agent the
// component's Kubernetes counterpart sends (kube-scheduler/..., kubelet/...):
// the API server names the field manager of its writes after its first
// segment, so managedFields say which component wrote which field. rate is
// its client-side rate limit (kubeAPIRateFlags).
func newComponentClient(kubeconfig, identity string, rate kubeAPIRate, opts ...remote.Option) (*remote.Client, error) {
	cfg, err := remote.LoadKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	agent := "kubelet" // a node's
	switch identity {
	case "kube-scheduler", "kube-controller-manager", "network-agent":
		agent = identity
	case "admin":
		agent = "podlab"
	}
	cfg.UserAgent = agent + "/podlab (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
	cfg.QPS, cfg.Burst = rate.QPS, rate.Burst
	rc, err := remote.New(cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
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

// openAPI is a kubectl-style command's client of the state directory's
// API server, for the user the global flags name (default admin). When a
// podlab apiserver serves the state directory (it holds the store's claim,
// with its URL in it: rest.Serving), the command is its client over HTTPS
// with <state-dir>/kubeconfigs/admin.kubeconfig: --as is impersonation,
// --token a bearer token, and -v narrates each request as kubectl -v=6
// does. Otherwise it opens the store in-process, as before there was a
// server: writes print each phase of the gate as it happens; reads print
// them with -v (to stderr, so that -o yaml stays clean). -v says which way
// was taken.
func openAPI(c *cli.Context, write bool) (*apiSession, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	l := statedir.Layout{Dir: dir}
	claim, serving, err := rest.WaitServing(c.Context, l.APIServerLock(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	if !serving {
		if c.Bool("v") {
			fmt.Fprintf(c.App.ErrWriter, "no podlab apiserver serves %s: opening its store in-process, where the gate runs (start `podlab apiserver` and this command becomes its client over HTTPS)\n", dir)
		}
		return openAPIAs(c, write, "admin")
	}
	return openNetwork(c, l, claim, write)
}

// openNetwork is openAPI over HTTPS to the API server claim names.
func openNetwork(c *cli.Context, l statedir.Layout, claim rest.Claimant, write bool) (*apiSession, error) {
	kubeconfig := l.Kubeconfig("admin")
	cfg, err := remote.LoadKubeconfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("podlab apiserver (pid %d) serves %s: %w", claim.PID, l.Dir, err)
	}
	cfg.Host = claim.URL         // the port it listens on, whatever the kubeconfig says
	cfg.QPS, cfg.Burst = 50, 300 // kubectl's
	user := authn.User{Name: "admin", Groups: []string{"system:masters"}}
	var unauthorized string
	how := "as admin (its client certificate in " + kubeconfig + ")"
	switch as, token := c.String("as"), c.String("token"); {
	case token != "":
		// the token alone: a client certificate would be authenticated first
		cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
		cfg.BearerToken = token
		user = authn.User{Name: "the bearer token's user"}
		if tokens, err := authn.Load(authn.Path(l.Dir)); err == nil {
			if u, ok := tokens.Authenticate(token); ok {
				user = u
			}
		}
		how = "with the bearer token of --token (" + user.Name + ")"
		// the in-process gate's hint, for the server's bare "Unauthorized"
		unauthorized = "the bearer token is not in the token file " + authn.Path(l.Dir) + "; act as a user with --as NAME, or pass one of its tokens"
	case as != "" && as != "admin":
		// kubectl --as: admin (system:masters) may impersonate anyone. The
		// groups are the token file's for that user, sent as
		// Impersonate-Group, since impersonation looks nothing up.
		tokens, err := authn.Load(authn.Path(l.Dir))
		if err != nil {
			return nil, err
		}
		if _, err := tokens.TokenFor(as); err != nil {
			return nil, fmt.Errorf("--as %s: %w", as, err)
		}
		user = authn.User{Name: as}
		for _, e := range tokens.Entries() {
			if e.User.Name == as {
				user.Groups = e.User.Groups
			}
		}
		cfg.Impersonate = restclient.ImpersonationConfig{UserName: as, Groups: user.Groups}
		how = fmt.Sprintf("as admin impersonating %s (Impersonate-User: %s", as, as)
		for _, g := range user.Groups {
			how += ", Impersonate-Group: " + g
		}
		how += ")"
	}
	if c.Bool("v") {
		fmt.Fprintf(c.App.ErrWriter, "podlab apiserver (pid %d) serves %s: a client of it at %s over HTTPS, %s\n", claim.PID, l.Dir, claim.URL, how)
		cfg.WrapTransport = remote.RequestLog(c.App.ErrWriter)
	}
	rc, err := remote.New(cfg)
	if err != nil {
		return nil, err
	}
	nc := &networkClient{Client: rc, user: user, unauthorized: unauthorized}
	if write {
		// where the in-process gate prints its phases, one line
		nc.gateNote = func() {
			fmt.Fprintf(c.App.Writer, "  the gate (authentication, authorization, admission, validation) ran in podlab apiserver (pid %d, %s): its phases are in its log (podlab apiserver -v)\n", claim.PID, claim.URL)
		}
	}
	return &apiSession{client: nc}, nil
}

// networkClient is the API server over HTTPS, acting as user.
type networkClient struct {
	*remote.Client
	user authn.User
	// gateNote, when set, is called with each write, where the in-process
	// gate narrates its phases.
	gateNote func()
	// unauthorized is the hint a 401 gets, as the in-process gate gives it.
	unauthorized string
}

// hint adds the in-process gate's hint to a 401, so that an error reads
// the same either way.
func (n *networkClient) hint(err error) error {
	if n.unauthorized != "" && apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%w: %s", err, n.unauthorized)
	}
	return err
}

func (n *networkClient) Get(ctx context.Context, resource, namespace, name string) (apiserver.Object, error) {
	obj, err := n.Client.Get(ctx, resource, namespace, name)
	return obj, n.hint(err)
}

func (n *networkClient) List(ctx context.Context, resource, namespace string, opts apiserver.ListOptions) (*apiserver.List, error) {
	l, err := n.Client.List(ctx, resource, namespace, opts)
	return l, n.hint(err)
}

func (n *networkClient) Watch(ctx context.Context, resource, namespace string, opts apiserver.ListOptions) (apiserver.Watcher, error) {
	w, err := n.Client.Watch(ctx, resource, namespace, opts)
	return w, n.hint(err)
}

func (n *networkClient) note() {
	if n.gateNote != nil {
		n.gateNote()
	}
}

func (n *networkClient) Create(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	defer n.note()
	obj, err := n.Client.Create(ctx, obj)
	return obj, n.hint(err)
}

func (n *networkClient) Update(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	defer n.note()
	obj, err := n.Client.Update(ctx, obj)
	return obj, n.hint(err)
}

func (n *networkClient) UpdateStatus(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	defer n.note()
	obj, err := n.Client.UpdateStatus(ctx, obj)
	return obj, n.hint(err)
}

func (n *networkClient) Patch(ctx context.Context, resource, namespace, name string, pt types.PatchType, data []byte, opts apiserver.PatchOptions) (apiserver.Object, error) {
	defer n.note()
	obj, err := n.Client.Patch(ctx, resource, namespace, name, pt, data, opts)
	return obj, n.hint(err)
}

func (n *networkClient) Bind(ctx context.Context, b *corev1.Binding) error {
	defer n.note()
	return n.hint(n.Client.Bind(ctx, b))
}

func (n *networkClient) Delete(ctx context.Context, resource, namespace, name string, opts apiserver.DeleteOptions) (apiserver.Object, error) {
	defer n.note()
	obj, err := n.Client.Delete(ctx, resource, namespace, name, opts)
	return obj, n.hint(err)
}

// Access asks with a SelfSubjectAccessReview.
func (n *networkClient) Access(ctx context.Context, verb, resource, subresource, namespace, name string) (authn.User, rbac.Decision, error) {
	d, err := n.AccessReview(ctx, verb, resource, subresource, namespace, name)
	return n.user, d, n.hint(err)
}

// Rules asks with a SelfSubjectRulesReview.
func (n *networkClient) Rules(ctx context.Context, namespace string) (authn.User, []rbacv1.PolicyRule, error) {
	rules, err := n.RulesReview(ctx, namespace)
	return n.user, rules, n.hint(err)
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
		fmt.Fprintf(w, "  %s\n", p.Line())
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

// insideCreateFlag is --pod of unpack and spec: no kubelet stage any more,
// the runtime does it inside CRI CreateContainer; the flag says so.
func insideCreateFlag() cli.Flag {
	return &cli.StringFlag{Name: "pod", Usage: "no kubelet stage: for `POD`, the runtime does this inside CRI CreateContainer (podlab runc create --pod POD, or podlab kubelet --pod POD --stage create); the command says so"}
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
