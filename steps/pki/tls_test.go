package pki_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/pki"
)

// TestServerTLSConfig_EndToEnd serves HTTPS with ServerTLSConfig and the
// authenticator, as the API server will, and calls it as real clients do:
// the handshake never fails on a client certificate; the authenticator
// decides.
func TestServerTLSConfig_EndToEnd(t *testing.T) {
	o := options(t)
	ensure(t, o)
	l := o.Layout
	cfg, err := pki.ServerTLSConfig(l)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequestClientCert || cfg.MinVersion != tls.VersionTLS12 || cfg.ClientCAs != nil {
		t.Errorf("ServerTLSConfig: ClientAuth %v, MinVersion %x, ClientCAs %v; want RequestClientCert, TLS 1.2, none", cfg.ClientAuth, cfg.MinVersion, cfg.ClientCAs)
	}
	roots, err := pki.ClientCAs(l)
	if err != nil {
		t.Fatal(err)
	}
	a := authn.NewX509(roots)
	var mu sync.Mutex
	var log bytes.Buffer
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := a.AuthenticateRequest(r)
		switch {
		case err != nil:
			mu.Lock()
			fmt.Fprintf(&log, "Unable to authenticate the request: %v\n", err)
			mu.Unlock()
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case !ok:
			fmt.Fprintln(w, "anonymous")
		default:
			fmt.Fprintln(w, u.Name, u.Groups)
		}
	}))
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("server at %s, want 127.0.0.1", srv.URL)
	}

	foreignCA, _ := pki.NewCA("kubernetes")
	foreign, err := foreignCA.Issue(pki.Spec{CommonName: "admin", Organization: []string{"system:masters"}, Usages: client})
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string) []tls.Certificate {
		kp, err := pki.LoadKeyPair(l.PKICert(name), l.PKIKey(name))
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{kp.TLSCertificate()}
	}
	tests := []struct {
		name  string
		certs []tls.Certificate
		code  int
		body  string
		log   string
	}{
		{"admin", load("admin"), 200, "admin [system:masters system:authenticated]", ""},
		{"kubelet", load("node-1"), 200, "system:node:node-1 [system:nodes system:authenticated]", ""},
		{"no certificate", nil, 200, "anonymous", ""},
		{"another CA's certificate", []tls.Certificate{foreign.TLSCertificate()}, 401, "Unauthorized",
			"verifying certificate SN=" + foreign.Cert.SerialNumber.String()},
		{"a serving certificate as a client's", load("kubelet-node-1"), 401, "Unauthorized", "incompatible key usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: tt.certs}}}
			resp, err := c.Get(srv.URL + "/api")
			if err != nil {
				t.Fatalf("the request failed (a TLS error?): %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || strings.TrimSpace(string(body)) != tt.body {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, tt.code, tt.body)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.log != "" && !strings.Contains(log.String(), tt.log) {
				t.Errorf("the server logged %q, want the reason %q", log.String(), tt.log)
			}
		})
	}

	t.Run("client-go from admin.kubeconfig", func(t *testing.T) {
		rc, err := clientcmd.BuildConfigFromFlags(srv.URL, l.Kubeconfig("admin"))
		if err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if got := strings.TrimSpace(string(body)); got != "admin [system:masters system:authenticated]" {
			t.Errorf("client-go with admin.kubeconfig: %q", got)
		}
	})

	t.Run("a client that does not trust the CA refuses the server", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
		_, err := c.Get(srv.URL + "/api")
		var uerr x509.UnknownAuthorityError
		if !errors.As(err, &uerr) {
			t.Errorf("err = %v, want x509.UnknownAuthorityError", err)
		}
	})
}

func TestServerTLSConfig_NoPKI(t *testing.T) {
	o := options(t)
	if _, err := pki.ServerTLSConfig(o.Layout); err == nil || !strings.Contains(err.Error(), "podlab init") {
		t.Errorf("ServerTLSConfig without a PKI: %v, want a hint to run podlab init", err)
	}
	if _, err := pki.ClientCAs(o.Layout); !errors.Is(err, pki.ErrNoCA) {
		t.Errorf("ClientCAs without a PKI: %v, want ErrNoCA", err)
	}
}
