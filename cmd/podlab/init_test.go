package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit_PKI: podlab init narrates the PKI it makes, keeps it when run
// again, gives a node added later its certificates, and refuses a bad port
// before writing anything.
func TestInit_PKI(t *testing.T) {
	state := t.TempDir()
	out := mustPodlab(t, state, "init")
	for _, want := range []string{
		"made  ca.crt ", "CN=kubernetes", "the cluster CA, which every component trusts",
		"made  admin.crt ", "CN=admin, O=system:masters",
		"made  node-1.crt ", "CN=system:node:node-1, O=system:nodes",
		"made  kubelet-node-1.crt", "made  apiserver-kubelet-client.crt",
		"IP Address:127.0.0.1", "IP Address:10.96.0.1", "DNS:kubernetes.default.svc.cluster.local",
		"cluster podlab at https://127.0.0.1:6443",
		"made  admin.kubeconfig", "context admin@podlab", "made  node-1.kubeconfig",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab init does not say %q:\n%s", want, out)
		}
	}
	ca, err := os.ReadFile(filepath.Join(state, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}

	out = mustPodlab(t, state, "init", "--apiserver-port", "7443")
	if strings.Contains(out, "made ") || !strings.Contains(out, "kept  ca.crt") || !strings.Contains(out, "updated  admin.kubeconfig") ||
		!strings.Contains(out, "at https://127.0.0.1:7443") {
		t.Errorf("podlab init --apiserver-port 7443 again: want every certificate kept and the kubeconfigs updated:\n%s", out)
	}
	if again, _ := os.ReadFile(filepath.Join(state, "pki", "ca.crt")); string(again) != string(ca) {
		t.Error("a second init changed ca.crt")
	}

	out = mustPodlab(t, state, "node", "add", "node-2")
	if !strings.Contains(out, "made "+filepath.Join(state, "pki", "node-2.crt")) || !strings.Contains(out, "kubeconfigs/node-2.kubeconfig") {
		t.Errorf("podlab node add node-2 issued no certificates:\n%s", out)
	}
	out = mustPodlab(t, state, "init")
	if !strings.Contains(out, "kept  node-2.crt") || !strings.Contains(out, "kept  node-2.kubeconfig") || !strings.Contains(out, "at https://127.0.0.1:7443") {
		t.Errorf("init after node add: want node-2's files kept and the port the kubeconfigs name kept:\n%s", out)
	}

	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"port 0", []string{"init", "--apiserver-port", "0"}, "want a TCP port"},
		{"a node named as an identity", []string{"node", "add", "viewer"}, "choose another name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fresh := t.TempDir()
			if tt.args[0] == "node" {
				mustPodlab(t, fresh, "init")
			}
			_, _, err := podlab(t, fresh, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("podlab %s: %v, want an error saying %q", strings.Join(tt.args, " "), err, tt.says)
			}
			if tt.args[0] == "init" {
				if _, err := os.Stat(filepath.Join(fresh, "etcd")); err == nil {
					t.Error("a refused init wrote the store")
				}
			}
		})
	}
}
