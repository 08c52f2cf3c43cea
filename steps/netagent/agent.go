package netagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

// DefaultResync is how often Run checks the routing table even when no
// Node changed, and puts back a route someone deleted (flannel checks its
// host-gw routes every 10 s).
const DefaultResync = 10 * time.Second

// Config is what an agent needs.
type Config struct {
	// Client acts as the agent's identity (the ClusterRole network-agent:
	// get, list and watch nodes).
	Client apiserver.Interface
	// Node is the node the agent runs on: its own podCIDR is not routed.
	Node string
	// Netns is the path of the node's network namespace (a bind mount);
	// "" is the namespace the agent runs in.
	Netns string
	// Log receives one line per route change and per node that cannot be
	// routed to (nil: discarded).
	Log io.Writer
	// Resync is how often Run reconciles without a change (default
	// DefaultResync).
	Resync time.Duration
}

// Result is what one reconciliation did.
type Result struct {
	// Routes are the routes wanted.
	Routes  []Route
	Changes []Change
	Skipped []Skip
}

// Agent keeps one node's routes to the other nodes' pods.
type Agent struct {
	cfg Config
	r   *Router

	mu      sync.Mutex
	skipped map[string]string // node -> the reason last logged
	lastErr string            // the error last logged, not logged again
}

// New opens the node's network namespace.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" {
		return nil, fmt.Errorf("%w: the agent routes to every node but its own: name it (--node NAME)", ErrNoNode)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	r, err := OpenRouter(cfg.Netns)
	if err != nil {
		return nil, err
	}
	return &Agent{cfg: cfg, r: r, skipped: map[string]string{}}, nil
}

// Close closes the netlink socket. The routes stay, as flannel's do when
// flanneld stops: the pods keep their network.
func (a *Agent) Close() { a.r.Close() }

// Sync lists the Nodes and reconciles once: what `podlab network-agent
// --once` does.
func (a *Agent) Sync(ctx context.Context) (*Result, error) {
	l, err := a.cfg.Client.List(ctx, "nodes", "", apiserver.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	return a.reconcile(nodesOf(l.Items))
}

// Run watches the Nodes (an informer) and reconciles after every change,
// and every Resync, until ctx ends. A failed reconciliation is logged and
// tried again at the next change or resync; while the agent's own Node
// does not exist (ErrUnknownNode) it changes nothing, and says so once. It returns nil when ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	inf := apiserver.NewInformer(a.cfg.Client, "nodes", "", apiserver.ListOptions{})
	if err := inf.Sync(ctx, nil); err != nil {
		return fmt.Errorf("listing the nodes: %w", err)
	}
	a.reconcileLogged(inf.List())
	errc := make(chan error, 1)
	go func() {
		errc <- inf.Run(ctx, func(apiserver.WatchEvent) { a.reconcileLogged(inf.List()) })
	}()
	tick := time.NewTicker(a.cfg.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			<-errc
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-tick.C:
			a.reconcileLogged(inf.List())
		}
	}
}

func (a *Agent) reconcileLogged(objs []apiserver.Object) {
	_, err := a.reconcile(nodesOf(objs))
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil:
		a.lastErr = ""
	case errors.Is(err, ErrUnknownNode) && a.lastErr == err.Error():
		// said once: it stays so until the node is registered
	default:
		a.lastErr = err.Error()
		fmt.Fprintf(a.cfg.Log, "error: %v\n", err)
	}
}

// reconcile makes the routing table match nodes, and logs what changed
// and each node newly skipped (once per reason, not at every pass).
func (a *Agent) reconcile(nodes []*corev1.Node) (*Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return n.Name == a.cfg.Node }) {
		return nil, fmt.Errorf("%w: no Node is named %q (kubectl get nodes lists them): check --node, or start its kubelet first (podlab kubelet --node %s); no route is changed until it exists",
			ErrUnknownNode, a.cfg.Node, a.cfg.Node)
	}
	routes, skipped := Desired(a.cfg.Node, nodes)
	changes, notOurs, err := a.r.Apply(routes)
	skipped = append(skipped, notOurs...)
	for _, c := range changes {
		fmt.Fprintln(a.cfg.Log, c)
	}
	now := map[string]string{}
	for _, s := range skipped {
		why := s.Reason.Error()
		now[s.Node] = why
		if a.skipped[s.Node] != why {
			fmt.Fprintf(a.cfg.Log, "node %s: no route: %s\n", s.Node, why)
		}
	}
	a.skipped = now
	res := &Result{Routes: routes, Changes: changes, Skipped: skipped}
	if err != nil {
		return res, fmt.Errorf("routing to the other nodes' pods: %w", err)
	}
	return res, nil
}

func nodesOf(objs []apiserver.Object) []*corev1.Node {
	var out []*corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}
