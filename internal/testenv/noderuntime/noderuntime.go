// Package noderuntime serves a node's container runtime (steps/cri) in the
// test's own process, on the node's socket, for tests of the kubelet: a
// kubelet is a CRI client of its node's runtime.
package noderuntime

import (
	"context"
	"testing"

	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// Serve serves n's runtime, with the OCI runtime runcBin and the shim
// command shim, on n's own socket until the test ends (plain HTTP to
// registries allowed: the tests' registries are in-process), and returns
// the kubelet's CRI client of it, as the kubelet's ConnectRuntime makes it.
func Serve(tb testing.TB, n statedir.Node, runcBin string, shim []string) *criremote.Client {
	tb.Helper()
	return ServeConfig(tb, cri.Config{Node: n, Runtime: runcBin, Shim: shim, Insecure: true})
}

// ServeConfig is Serve of the runtime cfg describes (its Node, runc, shim,
// handlers, CNI plugin directories, snapshotter).
func ServeConfig(tb testing.TB, cfg cri.Config) *criremote.Client {
	tb.Helper()
	n := cfg.Node
	ctx, cancel := context.WithCancel(context.Background())
	ln, _, err := cri.Listen(ctx, n.CRISocket())
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	srv, _, err := cri.New(ctx, cfg)
	if err != nil {
		cancel()
		ln.Close()
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	c, err := criremote.Dial("unix://"+n.CRISocket(), "", criremote.Options{})
	if err != nil {
		cancel()
		<-served
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		cancel()
		<-served
	})
	return c
}
