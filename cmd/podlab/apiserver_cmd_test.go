package main

import (
	"os"
	"strings"
	"testing"
)

// Without the PKI `podlab init` makes, the API server says what to do, and
// opens nothing.
func TestAPIServer_NoServingCertificate(t *testing.T) {
	state := t.TempDir()
	_, _, err := podlab(t, state, "apiserver", "--secure-port", "0")
	if err == nil || !strings.Contains(err.Error(), "no serving certificate: run `podlab init` first") {
		t.Fatalf("got %v, want the hint to run podlab init", err)
	}
	_, _, err = podlab(t, state, "apiserver", "--tls-cert-file", "/nonexistent/x.crt")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/x.crt") {
		t.Errorf("got %v, want the path of the missing certificate", err)
	}
}

// A negative toleration is refused before anything is opened or written.
func TestAPIServer_NegativeTolerationSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"not-ready", []string{"--default-not-ready-toleration-seconds", "-1"},
			"--default-not-ready-toleration-seconds=-1: toleration seconds must be 0 or more (0 evicts at once)"},
		{"unreachable", []string{"--default-unreachable-toleration-seconds=-20"},
			"--default-unreachable-toleration-seconds=-20: toleration seconds must be 0 or more (0 evicts at once)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			_, _, err := podlab(t, state, append([]string{"apiserver", "--secure-port", "0"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(state); len(entries) != 0 {
				t.Errorf("the refused command left %d entries in the state directory", len(entries))
			}
		})
	}
}
