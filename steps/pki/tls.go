package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/podlab/podlab/steps/statedir"
)

// ServingTLSConfig is a server's TLS settings as kube-apiserver's: its
// serving certificate, TLS 1.2 at least, and client certificates asked for
// but not required or verified in the handshake (tls.RequestClientCert).
// The authenticator verifies them (steps/apiserver/authn's X509), so a
// client whose certificate the CA did not sign gets a 401 with the reason
// in the server's log, not a TLS alert, and a client with no certificate
// may still bring a bearer token.
//
// It names no acceptable CAs (ClientCAs): a client then sends its
// certificate whichever CA signed it, and the authenticator says why it is
// refused. (kube-apiserver names its client CA; Go's client then keeps a
// certificate of another CA to itself, and the request is anonymous.)
func ServingTLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   tls.VersionTLS12,
	}
}

// ServerTLSConfig is the API server's TLS settings (ServingTLSConfig), with
// its serving certificate pki/apiserver.crt.
func ServerTLSConfig(l statedir.Layout) (*tls.Config, error) {
	return servingConfig(l, "apiserver")
}

// KubeletTLSConfig is the TLS settings of node's kubelet API, with its
// serving certificate pki/kubelet-NODE.crt.
func KubeletTLSConfig(l statedir.Layout, node string) (*tls.Config, error) {
	return servingConfig(l, "kubelet-"+node)
}

func servingConfig(l statedir.Layout, name string) (*tls.Config, error) {
	kp, err := LoadKeyPair(l.PKICert(name), l.PKIKey(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("loading the serving certificate: %w: run `podlab init` to make it", err)
		}
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return ServingTLSConfig(kp.TLSCertificate()), nil
}

// ClientCAs is the pool of the cluster CA (pki/ca.crt): what an
// authenticator verifies client certificates against, and what a client
// verifies the API server's certificate against.
func ClientCAs(l statedir.Layout) (*x509.CertPool, error) {
	data, err := os.ReadFile(l.CACert())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s): run `podlab init` first", ErrNoCA, l.CACert())
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cluster CA: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate; %s", ErrBadCA, l.CACert(), startOver(l))
	}
	return p, nil
}
