package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Validity periods, as kubeadm's (CACertificateValidityPeriod and
// CertificateValidityPeriod): the CA ten years, the certificates it signs
// one, counted from when they are made; each is valid from Backdate before
// that (kubeadm's CertificateBackdate, for clocks a little behind).
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	Backdate     = 5 * time.Minute
	// KeyBits is the size of every RSA key, kubeadm's default
	// encryptionAlgorithm RSA-2048.
	KeyBits = 2048
	// RenewBefore is how long before its end a certificate is re-issued by
	// a new `podlab init`.
	RenewBefore = 30 * 24 * time.Hour
)

// CACommonName is the CA's subject, as kubeadm names it.
const CACommonName = "kubernetes"

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Spec says what certificate to issue.
type Spec struct {
	// CommonName is the subject's CN: the user name of a client
	// certificate.
	CommonName string
	// Organization is the subject's O: the groups of a client
	// certificate.
	Organization []string
	// Usages are the extended key usages: ClientAuth, ServerAuth or both.
	Usages []x509.ExtKeyUsage
	// DNSNames and IPs are the subject alternative names of a serving
	// certificate: the names a client may dial it by.
	DNSNames []string
	IPs      []net.IP
	// NotBefore is when it is made (zero: now): it is valid from Backdate
	// before, until Validity after (zero: CertValidity), never past the
	// CA's end.
	NotBefore time.Time
	Validity  time.Duration
}

// newKey makes an RSA key of KeyBits, as kubeadm's GeneratePrivateKey
// does by default (see the package doc).
func newKey() (*rsa.PrivateKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return nil, fmt.Errorf("making an RSA %d key: %w", KeyBits, err)
	}
	return k, nil
}

// serialNumber is a random serial in [1, MaxInt64), as kubeadm's.
func serialNumber() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64-1))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// NewCA makes a self-signed CA called commonName as kubeadm's
// NewSelfSignedCACert does (pkiutil): key usages digital signature, key
// encipherment and certificate signing, its name as a DNS SAN, valid from
// Backdate ago for CAValidity from now.
func NewCA(commonName string) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		DNSNames:              []string{commonName},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("making the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("reading back the CA certificate: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Issue makes a new key and a certificate for it, signed by ca, as
// kubeadm's NewSignedCert does: key usages digital signature and key
// encipherment, valid from Backdate before it is made until Validity
// after.
func (ca *KeyPair) Issue(spec Spec) (*KeyPair, error) {
	if spec.CommonName == "" {
		return nil, errors.New("issuing a certificate: no common name")
	}
	if len(spec.Usages) == 0 {
		return nil, fmt.Errorf("issuing the certificate of %s: no usage (ClientAuth or ServerAuth)", spec.CommonName)
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	made := spec.NotBefore
	if made.IsZero() {
		made = time.Now()
	}
	made = made.UTC().Truncate(time.Second)
	validity := spec.Validity
	if validity == 0 {
		validity = CertValidity
	}
	notAfter := made.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		DNSNames:              spec.DNSNames,
		IPAddresses:           spec.IPs,
		NotBefore:             made.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           spec.Usages,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", spec.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("reading back the certificate of %s: %w", spec.CommonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// CertPEM is the certificate in PEM, as in a .crt file.
func (kp *KeyPair) CertPEM() []byte {
	b, _ := certutil.EncodeCertificates(kp.Cert) // encoding a parsed certificate cannot fail
	return b
}

// KeyPEM is the private key in PEM, as in a .key file ("RSA PRIVATE KEY",
// PKCS #1, as kubeadm writes it).
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	b, err := keyutil.MarshalPrivateKeyToPEM(kp.Key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key of %s: %w", kp.Cert.Subject.CommonName, err)
	}
	return b, nil
}

// TLSCertificate is the pair as crypto/tls takes it.
func (kp *KeyPair) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
}

// Pool is a pool holding only the pair's certificate: the roots a client or
// an authenticator trusts when the pair is the CA.
func (kp *KeyPair) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(kp.Cert)
	return p
}

// Write writes the pair: the key (mode 0600) first, then the certificate
// (0644), each to a temporary file renamed into place, so that a crash
// leaves either the old file or the new one.
func (kp *KeyPair) Write(certPath, keyPath string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(certPath, kp.CertPEM(), 0o644)
}

// LoadKeyPair reads a certificate and its key and checks that the key is
// the certificate's.
func LoadKeyPair(certPath, keyPath string) (*KeyPair, error) {
	cert, err := LoadCert(certPath)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("reading the key %s: %w", keyPath, err)
	}
	k, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("reading the key %s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("reading the key %s: a %T cannot sign", keyPath, k)
	}
	type publicKey interface{ Equal(crypto.PublicKey) bool }
	if pub, ok := signer.Public().(publicKey); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("the key %s is not the key of the certificate %s", keyPath, certPath)
	}
	return &KeyPair{Cert: cert, Key: signer}, nil
}

// LoadCert reads the first certificate of a PEM file.
func LoadCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the certificate %s: %w", path, err)
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return nil, fmt.Errorf("reading the certificate %s: %w", path, err)
	}
	return certs[0], nil
}

// writeFile writes data to path with mode, through a temporary file in the
// same directory renamed into place.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
