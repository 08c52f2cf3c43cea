// Command podlab re-enacts, stage by stage and for real, how Kubernetes
// creates a Pod: the API server's gate and store, the controllers, the
// scheduler, the kubelet, and the container runtime down to runc.
//
// main only calls Run and exits on its error, as kind's main does.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := Run(os.Args, os.Stdin, os.Stdout, os.Stderr); err != nil {
		// A container's own exit code comes back as an error with no message:
		// pass the code on and say nothing.
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(os.Stderr, "podlab: %s\n", msg)
		}
		os.Exit(exitCode(err))
	}
}
