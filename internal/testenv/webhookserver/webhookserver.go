// Package webhookserver serves the lab's admission webhook
// (steps/apiserver/webhook.Handler) over real TLS for the tests of the API
// server that calls it, with a certificate of a CA of its own. It is its
// own package, as demoregistry is: testenv importing the API server's
// packages would make an import cycle in their tests.
package webhookserver

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/podlab/podlab/steps/apiserver/webhook"
	"github.com/podlab/podlab/steps/pki"
)

// Serve serves webhook.Handler(p) on 127.0.0.1 until the test ends,
// calling before (when not nil) ahead of every review. It returns the base
// URL and the CA's PEM, the caBundle a webhook configuration names.
func Serve(t testing.TB, p webhook.Policy, before func(r *http.Request)) (string, []byte) {
	t.Helper()
	ca, err := pki.NewCA("webhook-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Spec{CommonName: "webhook", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	h := webhook.Handler(p, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(r)
		}
		h.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp.TLSCertificate()}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, ca.CertPEM()
}
