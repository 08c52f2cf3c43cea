// Command kube-apiserver is the real kube-apiserver of the lab's Kubernetes
// release (v1.37.2), built from the k8s.io/kubernetes module: the same main
// as kubernetes/cmd/kube-apiserver. `make kube-apiserver` builds it into
// bin/kube-apiserver with its version set through -ldflags (see the
// Makefile), so clients read v1.37.2 from /version. The benchmarks run it
// beside podlab's API server (internal/bench: BenchmarkNetworkList), to
// compare both on the same machine in the same run.
//
// It is its own module so that podlab's go.mod does not take Kubernetes'
// dependencies; k8s.io/kubernetes' go.mod replaces its staging modules
// (k8s.io/api, k8s.io/apiserver, ...) with ./staging paths that exist only
// in its own repository, so this go.mod replaces each with its published
// v0.37.2 release instead.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
