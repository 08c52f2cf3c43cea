package main

import (
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
