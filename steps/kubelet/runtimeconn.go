package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
	// Mirror is the registry mirror Start gives the runtime
	// (--registry-mirror). When set, a runtime already answering on the
	// node's own socket that pulls through another mirror (its Status
	// verbose info says which) is stopped and started again with Start,
	// as containerd is restarted to take a changed registry config: the
	// kubelet's pulls go through the runtime, and a mirror that has gone
	// (podlab up's in-process registry, which ends with up) would fail
	// every one of them.
	Mirror string
}

// RuntimeConnected is a kubelet's runtime: its clients, what it answered,
// and the process ConnectRuntime started, if it started one.
type RuntimeConnected struct {
	Client  *criremote.Client
	Version string
	Started *criremote.Process
	// Restarted says why a running runtime was stopped before Started
	// (its mirror was not RuntimeConnection.Mirror); "" when none was.
	Restarted string
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
	if err == nil && rc.Mirror != "" && rc.RuntimeEndpoint == def && len(rc.Start) > 0 {
		if out.Restarted, err = stopOnOtherMirror(ctx, rc); err == nil && out.Restarted != "" {
			_, err = criremote.Probe(ctx, rc.RuntimeEndpoint, rc.Timeout)
			if err == nil {
				return nil, fmt.Errorf("node %s's runtime on %s %s, and still answers after its recorded process (%s) was stopped: stop it, or start it with --registry-mirror %s",
					rc.Node.Name, rc.RuntimeEndpoint, out.Restarted, rc.Node.RuntimePidFile(), rc.Mirror)
			}
		}
	}
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

// stopOnOtherMirror stops the runtime answering on the node's own socket
// when it pulls through another mirror than rc.Mirror (Status verbose
// info's registryMirror): why it stopped it, or "" when it kept it.
func stopOnOtherMirror(ctx context.Context, rc RuntimeConnection) (string, error) {
	c, err := criremote.Dial(rc.RuntimeEndpoint, "", criremote.Options{})
	if err != nil {
		return "", err
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, rc.Timeout)
	defer cancel()
	st, err := c.Runtime.Status(sctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("asking node %s's runtime for its configuration (CRI Status): %w", rc.Node.Name, err)
	}
	var cfg struct {
		RegistryMirror string `json:"registryMirror"`
	}
	json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg) // no config: no mirror
	if cfg.RegistryMirror == rc.Mirror {
		return "", nil
	}
	was := "pulls through the registry mirror " + cfg.RegistryMirror
	if cfg.RegistryMirror == "" {
		was = "pulls through no registry mirror"
	}
	if _, err := criremote.Stop(ctx, rc.Node.RuntimePidFile(), 10*time.Second); err != nil {
		return was, fmt.Errorf("stopping node %s's runtime, which %s, to start it with %s: %w", rc.Node.Name, was, rc.Mirror, err)
	}
	return was, nil
}

func noRuntime(rc RuntimeConnection, flag, endpoint string, err error) error {
	return fmt.Errorf("%w (%s %s): %v; start one there first: `podlab runtime --node %s` serves podlab's runtime on %s, `podlab containerd` the lab containerd on unix://%s",
		ErrNoRuntime, flag, endpoint, err, rc.Node.Name, DefaultRuntimeEndpoint(rc.Node), rc.Node.State().Containerd().Socket())
}
