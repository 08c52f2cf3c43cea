// Command podlab-runc is podlab's runtime in a small binary of its own, as
// containerd has containerd-shim-runc-v2 beside containerd and CRI-O has
// conmon: the part of the runtime that runs once per container.
//
//	podlab-runc run ID --bundle DIR   what `podlab runc run` does, in the foreground
//	podlab-runc shim                  the shim `podlab runc create`, the kubelet
//	                                  and `podlab runtime` start for each container
//
// Why a second binary: bin/podlab holds the whole chain (the API server and
// its Kubernetes types, client-go, containerd's and go-containerregistry's
// packages), and Go initialises every package of a program before main runs,
// whichever command was asked for: about 10 ms here before podlab reads a
// flag (GODEBUG=inittrace=1 bin/podlab runc run --help; client-go's scheme
// alone takes 3-5 ms), a third of a bare `runc run` of a trivial container.
// podlab-runc is only steps/runc and the command line, and starts in about 2
// ms (an empty Go program: 1 ms). Nothing else is different: the same
// steps/runc code runs, with the same state directory, the same records
// (containers/ID/...) and the same runc; `podlab runc state ID`, `logs ID` and
// `delete ID` read what podlab-runc wrote. `make build` builds both, and podlab
// starts the shim from podlab-runc when it sits beside bin/podlab
// (runc.ShimCommand), else from itself (`podlab runc shim`).
//
// main only calls Run and exits on its error, as podlab's main does.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := Run(os.Args, os.Stdin, os.Stdout, os.Stderr); err != nil {
		// A container's own exit code comes back as an error with no message.
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(os.Stderr, "podlab-runc: %s\n", msg)
		}
		code := 1
		var coder cli.ExitCoder
		if errors.As(err, &coder) && coder.ExitCode() != 0 {
			code = coder.ExitCode()
		}
		os.Exit(code)
	}
}
