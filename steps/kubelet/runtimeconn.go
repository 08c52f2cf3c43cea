package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// ErrNoRuntime means nothing answers CRI on the kubelet's
// --container-runtime-endpoint (or --image-service-endpoint), and it is
// not the node's own socket, which the kubelet would start a runtime on.
var ErrNoRuntime = errors.New("no container runtime answers on the kubelet's endpoint")

// DefaultRuntimeEndpoint is a node's own CRI socket, where `podlab runtime
// --node NAME` answers: unix://<state>/nodes/NAME/cri.sock (a real node's
// unix:///run/containerd/containerd.sock).
func DefaultRuntimeEndpoint(n statedir.Node) string { return "unix://" + n.CRISocket() }

// RuntimeConnection is how a kubelet reaches its container runtime.
type RuntimeConnection struct {
	// Node is the kubelet's node.
	Node statedir.Node
	// RuntimeEndpoint and ImageEndpoint are the kubelet's
	// --container-runtime-endpoint and --image-service-endpoint; default
	// DefaultRuntimeEndpoint, and the runtime endpoint.
	RuntimeEndpoint, ImageEndpoint string
	// Start is the command that serves the node's runtime on its own
	// socket (podlab runtime --node NAME). When the endpoint is that
	// socket and nothing answers, ConnectRuntime runs it as a process of
	// its own (criremote.Start), its output in <node>/runtime.log.
	Start []string
	// Log, when set, receives every CRI call with its request and
	// response (the kubelet's -v).
	Log io.Writer
	// Timeout bounds the first answer (default 2s; 30s for a runtime
	// started now).
	Timeout time.Duration
}

// RuntimeConnected is a kubelet's runtime: its clients, what it answered,
// and the process ConnectRuntime started, if it started one.
type RuntimeConnected struct {
	Client  *criremote.Client
	Version string
	Started *criremote.Process
}

// ConnectRuntime connects the kubelet to its runtime, as the kubelet's
// startup does (its first call is Version). When the runtime endpoint is
// the node's own socket and nothing answers, it starts the node's runtime
// (rc.Start), as systemd starts containerd.service before kubelet.service;
// any other endpoint nothing answers on is ErrNoRuntime, naming it and how
// to start a runtime there.
func ConnectRuntime(ctx context.Context, rc RuntimeConnection) (*RuntimeConnected, error) {
	def := DefaultRuntimeEndpoint(rc.Node)
	if rc.RuntimeEndpoint == "" {
		rc.RuntimeEndpoint = def
	}
	if rc.ImageEndpoint == "" {
		rc.ImageEndpoint = rc.RuntimeEndpoint
	}
	if rc.Timeout <= 0 {
		rc.Timeout = 2 * time.Second
	}
	out := &RuntimeConnected{}
	v, err := criremote.Probe(ctx, rc.RuntimeEndpoint, rc.Timeout)
	switch {
	case errors.Is(err, criremote.ErrUnreachable) && rc.RuntimeEndpoint == def && len(rc.Start) > 0:
		p, err := criremote.Start(ctx, criremote.StartSpec{
			Argv: rc.Start, Endpoint: def, LogPath: rc.Node.RuntimeLog(), PidFile: rc.Node.RuntimePidFile(),
		})
		if err != nil {
			return nil, fmt.Errorf("starting node %s's runtime: %w", rc.Node.Name, err)
		}
		out.Started, out.Version = p, p.Version
	case errors.Is(err, criremote.ErrUnreachable):
		return nil, noRuntime(rc, "--container-runtime-endpoint", rc.RuntimeEndpoint, err)
	case err != nil:
		return nil, fmt.Errorf("--container-runtime-endpoint: %w", err)
	default:
		out.Version = fmt.Sprintf("%s %s (CRI %s)", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	}
	if rc.ImageEndpoint != rc.RuntimeEndpoint {
		if _, err := criremote.Probe(ctx, rc.ImageEndpoint, rc.Timeout); errors.Is(err, criremote.ErrUnreachable) {
			return nil, noRuntime(rc, "--image-service-endpoint", rc.ImageEndpoint, err)
		} else if err != nil {
			return nil, fmt.Errorf("--image-service-endpoint: %w", err)
		}
	}
	c, err := criremote.Dial(rc.RuntimeEndpoint, rc.ImageEndpoint, criremote.Options{Log: rc.Log})
	if err != nil {
		return nil, err
	}
	out.Client = c
	return out, nil
}

func noRuntime(rc RuntimeConnection, flag, endpoint string, err error) error {
	return fmt.Errorf("%w (%s %s): %v; start one there first: `podlab runtime --node %s` serves podlab's runtime on %s, `podlab containerd` the lab containerd on unix://%s",
		ErrNoRuntime, flag, endpoint, err, rc.Node.Name, DefaultRuntimeEndpoint(rc.Node), rc.Node.State().Containerd().Socket())
}
