package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// X509 authenticates a request by its TLS client certificate, as
// kube-apiserver's --client-ca-file authenticator: the certificate must
// chain to the cluster CA and be made for client authentication; its
// subject's Common Name is the user, and each Organization a group.
//
// The TLS handshake only asks for the certificate (tls.RequestClientCert,
// see steps/pki's ServingTLSConfig); the verification is here, so a bad
// certificate is a 401 with a reason, not a TLS error.
//
// Verifying a chain is a signature check (RSA 2048, as kubeadm's keys;
// measured when they were ECDSA P-256 at about a tenth of what a small
// create costs the server), and a client sends the same chain with
// every request of its connection. So a chain that verified is remembered
// for VerifiedFor, never past its leaf's NotAfter (kube-apiserver verifies
// every request; what is cached is only a success, keyed by the chain's
// bytes, and the pool of CAs never changes under an X509).
type X509 struct {
	roots *x509.CertPool
	now   func() time.Time

	mu       sync.Mutex
	verified map[[sha256.Size]byte]time.Time // chain -> verified until
}

// VerifiedFor is how long a verified chain is remembered.
const VerifiedFor = time.Minute

// maxVerified bounds the remembered chains: past it they are all forgotten.
const maxVerified = 4096

// NewX509 trusts the CAs of roots (the cluster's pki/ca.crt).
func NewX509(roots *x509.CertPool) *X509 {
	return &X509{roots: roots, now: time.Now, verified: map[[sha256.Size]byte]time.Time{}}
}

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
	if err := a.verify(r.TLS.PeerCertificates); err != nil {
		return User{}, false, &certificateError{id: CertificateID(leaf), err: err}
	}
	if leaf.Subject.CommonName == "" {
		// kube-apiserver's CommonNameUserConversion: no name, no user.
		return User{}, false, nil
	}
	groups := append(append([]string(nil), leaf.Subject.Organization...), GroupAuthenticated)
	return User{Name: leaf.Subject.CommonName, Groups: groups}, true, nil
}

// verify checks that chain (the leaf first) chains to the roots and is
// made for client authentication, or remembers that it did.
func (a *X509) verify(chain []*x509.Certificate) error {
	now := a.now()
	h := sha256.New()
	for _, c := range chain {
		h.Write(c.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	a.mu.Lock()
	until, ok := a.verified[key]
	a.mu.Unlock()
	if ok && now.Before(until) {
		return nil
	}
	opts := x509.VerifyOptions{
		Roots:         a.roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		CurrentTime:   now,
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return err
	}
	until = now.Add(VerifiedFor)
	for _, c := range chain {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	a.mu.Lock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[key] = until
	a.mu.Unlock()
	return nil
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
