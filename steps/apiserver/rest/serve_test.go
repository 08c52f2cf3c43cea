package rest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
)

// writeCerts writes a CA and a serving certificate for 127.0.0.1 signed by
// it, as `podlab init` will.
func writeCerts(t *testing.T, dir string) ServerConfig {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podlab-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	cfg := ServerConfig{BindAddress: "127.0.0.1", TLSCertFile: filepath.Join(dir, "apiserver.crt"),
		TLSPrivateKeyFile: filepath.Join(dir, "apiserver.key"), ClientCAFile: filepath.Join(dir, "ca.crt")}
	for path, b := range map[string]*pem.Block{cfg.ClientCAFile: {Type: "CERTIFICATE", Bytes: caDER},
		cfg.TLSCertFile: {Type: "CERTIFICATE", Bytes: der}, cfg.TLSPrivateKeyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// ListenAndServe serves HTTPS with the serving certificate, and stops when
// its context ends, ending open watches.
func TestListenAndServe(t *testing.T) {
	l := newLab(t, nil)
	cfg := writeCerts(t, t.TempDir())
	sctx, stop := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(sctx, cfg, New(l.s, WithAuthenticator("token file", bearerTokens{l.tokens})), func(a string) { addrc <- a })
	}()
	addr := <-addrc
	ca, _ := os.ReadFile(cfg.ClientCAFile)
	cs, err := kubernetes.NewForConfig(&restclient.Config{Host: "https://" + addr, BearerToken: l.token("admin"),
		TLSClientConfig: restclient.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod("web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create over HTTPS: %v", err)
	}
	w, err := cs.CoreV1().Pods("default").Watch(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, w) // the pod
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	select {
	case _, ok := <-w.ResultChan():
		for ok {
			_, ok = <-w.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Error("the watch stayed open after the server stopped")
	}
	// a certificate from the handshake is asked for, never required
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Error("the port is still open")
	}
}

func TestServerConfig_BadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeCerts(t, dir)
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not PEM"), 0o600)
	tests := []struct {
		name string
		cfg  ServerConfig
		is   error
		says string
	}{
		{"no certificate", ServerConfig{TLSCertFile: filepath.Join(dir, "nope.crt"), TLSPrivateKeyFile: good.TLSPrivateKeyFile, ClientCAFile: good.ClientCAFile},
			ErrNoServingCertificate, "run `podlab init` first"},
		{"no client CA", ServerConfig{TLSCertFile: good.TLSCertFile, TLSPrivateKeyFile: good.TLSPrivateKeyFile, ClientCAFile: filepath.Join(dir, "nope.crt")},
			ErrNoServingCertificate, "no client CA"},
		{"a CA file that is not PEM", ServerConfig{TLSCertFile: good.TLSCertFile, TLSPrivateKeyFile: good.TLSPrivateKeyFile, ClientCAFile: garbage},
			nil, "holds no PEM certificate"},
		{"a key that is not the certificate's", ServerConfig{TLSCertFile: good.TLSCertFile, TLSPrivateKeyFile: garbage, ClientCAFile: good.ClientCAFile},
			nil, "loading the serving certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ListenAndServe(context.Background(), tt.cfg, http.NotFoundHandler(), nil)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}
