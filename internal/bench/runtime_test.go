package bench

import (
	"context"
	"testing"

	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// nodeRuntime serves node's runtime (steps/cri, in this process) on the
// node's own socket in the state directory dir until the test ends, and
// returns the kubelet's CRI client of it: a kubelet is a CRI client.
func nodeRuntime(tb testing.TB, dir, node, runcBin string, shim []string) *criremote.Client {
	tb.Helper()
	l, err := statedir.New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	n := l.Node(node)
	ctx, cancel := context.WithCancel(context.Background())
	ln, _, err := cri.Listen(ctx, n.CRISocket())
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	srv, _, err := cri.New(ctx, cri.Config{Node: n, Runtime: runcBin, Shim: shim, Insecure: true})
	if err != nil {
		cancel()
		ln.Close()
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	c, err := criremote.Dial(kubelet.DefaultRuntimeEndpoint(n), "", criremote.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		cancel()
		<-served
	})
	return c
}
