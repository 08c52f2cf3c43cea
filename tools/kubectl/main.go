// Command kubectl is the real kubectl of the lab's Kubernetes release, built
// from the k8s.io/kubectl module at the release of podlab's other k8s.io
// modules: the same main as kubernetes/cmd/kubectl. `make deps` builds it
// into bin/kubectl with its version set through -ldflags (see the Makefile),
// so `kubectl version` prints v1.37.2.
//
// It is its own module so that podlab's go.mod does not take kubectl's
// dependencies, and so that `go vet ./...` and `go test ./...` at the root
// do not descend into it (a directory with its own go.mod is outside the
// main module).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Parse -v before the command is built, as kubectl's own main does, so
	// klog narrates the construction too (plugins, .kuberc).
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
