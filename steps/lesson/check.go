package lesson

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
)

// Env says where Check looks.
type Env struct {
	// StateDir is podlab's state directory (--state-dir).
	StateDir string
	// Registry is the local registry's host:port; "" means 127.0.0.1:5001.
	Registry string
	// Runtime is the OCI runtime binary (runc); "" means the one podlab
	// would use (runc.FindRuntime).
	Runtime string
}

// DefaultRegistry is where `podlab registry serve` listens by default.
const DefaultRegistry = "127.0.0.1:5001"

// Result is the outcome of one check.
type Result struct {
	Name string // what was checked: "pod web is stored"
	OK   bool
	// Hint, when the check failed, says what was found and what to do.
	Hint string
}

// check is one check of a lesson: run returns nil when it passes, else an
// error whose message is the hint.
type check struct {
	name string
	run  func(ctx context.Context, p *probe) error
}

// Check runs the checks of lesson n against the real state env names: the
// API server's store (read as the admin, through the gate), the content
// store, bundles, runc's state and cgroup files. Each check is what the
// lesson made the learner do, as it stands right after the lesson. It
// returns nil when lesson n has no checks (see HasChecks).
func Check(ctx context.Context, n int, env Env) []Result {
	checks := checksOf(n)
	if checks == nil {
		return nil
	}
	p := &probe{env: env}
	defer p.close()
	out := make([]Result, 0, len(checks))
	for _, c := range checks {
		r := Result{Name: c.name, OK: true}
		if err := ctx.Err(); err != nil {
			r.OK, r.Hint = false, err.Error()
		} else if err := c.run(ctx, p); err != nil {
			r.OK, r.Hint = false, err.Error()
		}
		out = append(out, r)
	}
	return out
}

// HasChecks reports whether lesson n has checks.
func HasChecks(n int) bool { return checksOf(n) != nil }

// CheckNames lists the names of lesson n's checks, in the order Check runs
// them, without running them (nil when it has none): what `podlab check n`
// prints after PASS or FAIL.
func CheckNames(n int) []string {
	var out []string
	for _, c := range checksOf(n) {
		out = append(out, c.name)
	}
	return out
}

// checksOf returns the checks of lesson n, or nil.
func checksOf(n int) []check {
	switch n {
	case 1:
		return setupChecks()
	case 2:
		return apiserverChecks()
	case 3:
		return storeChecks()
	case 4:
		return schedulerChecks()
	case 5:
		return kubeletChecks()
	case 6:
		return pullChecks()
	case 7:
		return unpackChecks()
	case 8:
		return specChecks()
	case 9:
		return runcChecks()
	case 10:
		return logsChecks()
	case 11:
		return deploymentChecks()
	case 12:
		return togetherChecks()
	case 13:
		return cleanupChecks()
	case 14:
		return httpChecks()
	case 15:
		return nodeDiesChecks()
	case 16:
		return networkChecks()
	case 17:
		return criChecks()
	case 18:
		return containerdChecks()
	case 19:
		return runtimeClassChecks()
	}
	return nil
}

// probe opens what the checks read, once, as they first need it.
type probe struct {
	env    Env
	srv    *apiserver.Server
	client apiserver.Interface
	apiErr error
}

// api is a client of the state's API server, as the admin.
func (p *probe) api() (apiserver.Interface, error) {
	if p.client != nil || p.apiErr != nil {
		return p.client, p.apiErr
	}
	if _, err := os.Stat(authn.Path(p.env.StateDir)); err != nil {
		p.apiErr = fmt.Errorf("no API server in %s (no %s): run `podlab init` (lesson 02)", p.env.StateDir, authn.Path(p.env.StateDir))
		return nil, p.apiErr
	}
	srv, err := apiserver.Open(p.env.StateDir)
	if err != nil {
		p.apiErr = fmt.Errorf("opening the API server of %s: %w", p.env.StateDir, err)
		return nil, p.apiErr
	}
	c, err := srv.ClientAs("admin")
	if err != nil {
		srv.Close()
		p.apiErr = fmt.Errorf("acting as admin: %w", err)
		return nil, p.apiErr
	}
	p.srv, p.client = srv, c
	return c, nil
}

func (p *probe) close() {
	if p.srv != nil {
		p.srv.Close()
	}
}

func (p *probe) registry() string {
	if p.env.Registry != "" {
		return p.env.Registry
	}
	return DefaultRegistry
}

// pods lists pods in namespace ("" for all) matching a field selector.
func (p *probe) pods(ctx context.Context, namespace, fieldSelector string) ([]*corev1.Pod, error) {
	c, err := p.api()
	if err != nil {
		return nil, err
	}
	l, err := c.List(ctx, "pods", namespace, apiserver.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var out []*corev1.Pod
	for _, o := range l.Items {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}

// pod reads one pod; a missing pod is an error whose message says so.
func (p *probe) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	c, err := p.api()
	if err != nil {
		return nil, err
	}
	o, err := c.Get(ctx, "pods", namespace, name)
	if err != nil {
		return nil, err
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pods/%s is a %T", name, o)
	}
	return pod, nil
}

// fail is a failed check's hint.
func fail(format string, args ...any) error { return fmt.Errorf(format, args...) }

// names lists pods as ns/name, for hints.
func names(pods []*corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Namespace+"/"+p.Name)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
