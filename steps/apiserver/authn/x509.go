package authn

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// X509 authenticates a request by its TLS client certificate, as
// kube-apiserver's --client-ca-file authenticator: the certificate must
// chain to the cluster CA and be made for client authentication; its
// subject's Common Name is the user, and each Organization a group.
//
// The TLS handshake only asks for the certificate (tls.RequestClientCert,
// see steps/pki's ServingTLSConfig); the verification is here, so a bad
// certificate is a 401 with a reason, not a TLS error.
type X509 struct {
	roots *x509.CertPool
}

// NewX509 trusts the CAs of roots (the cluster's pki/ca.crt).
func NewX509(roots *x509.CertPool) *X509 { return &X509{roots: roots} }

// AuthenticateRequest verifies the request's client certificate. No TLS or
// no certificate is (User{}, false, nil): the next authenticator is asked.
// A certificate that does not verify is an error wrapping
// ErrInvalidCertificate, as kube-apiserver words it: "verifying certificate
// SN=..., SKID=..., AKID=... failed: x509: certificate signed by unknown
// authority".
func (a *X509) AuthenticateRequest(r *http.Request) (User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	opts := x509.VerifyOptions{
		Roots:         a.roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range r.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return User{}, false, &certificateError{id: CertificateID(leaf), err: err}
	}
	if leaf.Subject.CommonName == "" {
		// kube-apiserver's CommonNameUserConversion: no name, no user.
		return User{}, false, nil
	}
	groups := append(append([]string(nil), leaf.Subject.Organization...), GroupAuthenticated)
	return User{Name: leaf.Subject.CommonName, Groups: groups}, true, nil
}

// certificateError is a certificate that did not verify.
type certificateError struct {
	id  string
	err error
}

func (e *certificateError) Error() string {
	return fmt.Sprintf("verifying certificate %s failed: %v", e.id, e.err)
}

func (e *certificateError) Unwrap() []error { return []error{ErrInvalidCertificate, e.err} }

// CertificateID names a certificate in a log line as kube-apiserver does:
// its serial number, subject key id and authority key id.
func CertificateID(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%s, SKID=%s, AKID=%s", c.SerialNumber, keyID(c.SubjectKeyId), keyID(c.AuthorityKeyId))
}

func keyID(id []byte) string {
	parts := make([]string, len(id))
	for i, b := range id {
		parts[i] = strings.ToUpper(hex.EncodeToString([]byte{b}))
	}
	return strings.Join(parts, ":")
}
