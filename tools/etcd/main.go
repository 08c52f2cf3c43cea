// Command etcd is the real etcd, the key-value store behind every
// Kubernetes cluster, built from the Go module proxy: the same main as
// etcd's own (go.etcd.io/etcd/server/v3/etcdmain). `make deps` builds it
// into bin/etcd, and etcdctl beside it into bin/etcdctl.
//
// Debian 12's etcd is 3.4.23, older than what kube-apiserver v1.37 expects
// (watch progress notifications, 3.5+); podlab's API server speaks to this
// one when started with --etcd-servers (see `podlab etcd`).
//
// It is its own module so that podlab's go.mod does not take the etcd
// server's dependencies, and so that `go vet ./...` and `go test ./...` at
// the root do not descend into it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
