package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/podlab/podlab/steps/statedir"
)

// DefaultPort is the API server's secure port, kube-apiserver's default.
const DefaultPort = 6443

// ServerURL is the API server's URL on this machine, at port.
func ServerURL(port int) string { return fmt.Sprintf("https://127.0.0.1:%d", port) }

// Options say what Ensure makes, and where.
type Options struct {
	Layout statedir.Layout
	// APIServerHosts are added to the API server's SANs: the host's name
	// and addresses (MachineHosts).
	APIServerHosts []string
	// Nodes get a kubelet client and serving certificate each.
	Nodes []Node
	// Server is the API server's URL the kubeconfigs name. Empty keeps the
	// one admin.kubeconfig names, or else ServerURL(DefaultPort).
	Server string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Action says what Ensure did with a file.
type Action string

// Actions.
const (
	Made    Action = "made"
	Kept    Action = "kept"
	Renewed Action = "renewed" // re-issued: Reason says why
	Updated Action = "updated" // a kubeconfig rewritten: Reason says why
)

// Item is one certificate (with its key) or one kubeconfig Ensure made or
// kept.
type Item struct {
	Name    string
	Purpose string
	// Subject is the certificate's, or the kubeconfig's user's.
	Subject string
	Files   []string
	Action  Action
	Reason  string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// Result is what Ensure did.
type Result struct {
	PKIDir         string
	KubeconfigsDir string
	// Server is the URL the kubeconfigs name.
	Server       string
	Certificates []Item
	Kubeconfigs  []Item
}

// Ensure makes the lab's PKI under o.Layout, or completes it: the CA, the
// certificates of Credentials, and a kubeconfig per client identity. What
// exists and is still good is kept; see the package doc.
func Ensure(o Options) (*Result, error) {
	creds, err := Credentials(o.APIServerHosts, o.Nodes)
	if err != nil {
		return nil, err
	}
	if err := makeDirs(o.Layout); err != nil {
		return nil, err
	}
	ca, caItem, err := ensureCA(o.Layout, now(o))
	if err != nil {
		return nil, err
	}
	res := newResult(o)
	res.Certificates = append(res.Certificates, caItem)
	return res, issue(o, ca, creds, res)
}

// IssueNode gives a node added after `podlab init` its two certificates and
// its kubeconfig, signed by the existing CA (ErrNoCA if there is none).
func IssueNode(o Options, n Node) (*Result, error) {
	creds, err := NodeCredentials(n)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(o.Layout.CACert()); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("issuing the certificates of node %s: %w (no %s): run `podlab init` first", n.Name, ErrNoCA, o.Layout.CACert())
	}
	if err := makeDirs(o.Layout); err != nil {
		return nil, err
	}
	ca, err := LoadCA(o.Layout, now(o))
	if err != nil {
		return nil, err
	}
	res := newResult(o)
	return res, issue(o, ca, creds, res)
}

func now(o Options) time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func newResult(o Options) *Result {
	return &Result{PKIDir: o.Layout.PKIDir(), KubeconfigsDir: o.Layout.KubeconfigsDir()}
}

// makeDirs makes pki/ and kubeconfigs/, mode 0700: they hold private keys.
func makeDirs(l statedir.Layout) error {
	for _, d := range []string{l.PKIDir(), l.KubeconfigsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("making the directory %s: %w (is %s writable, and %s not a file?)", d, err, l.Dir, d)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("making %s private (mode 0700): %w", d, err)
		}
	}
	return nil
}

// startOver is the hint for a CA that cannot be used.
func startOver(l statedir.Layout) string {
	return fmt.Sprintf("to start the PKI over, remove %s and %s and run `podlab init` again: it makes a new CA and issues every certificate and kubeconfig anew", l.PKIDir(), l.KubeconfigsDir())
}

// ensureCA loads the CA, or makes it if there is no ca.crt.
func ensureCA(l statedir.Layout, now time.Time) (*KeyPair, Item, error) {
	item := Item{
		Name:    "ca",
		Purpose: "the cluster CA, which every component trusts and which signs every other certificate",
		Subject: "CN=" + CACommonName,
		Files:   []string{l.CACert(), l.CAKey()},
	}
	if _, err := os.Stat(l.CACert()); errors.Is(err, fs.ErrNotExist) {
		ca, err := NewCA(CACommonName)
		if err != nil {
			return nil, item, err
		}
		if err := ca.Write(l.CACert(), l.CAKey()); err != nil {
			return nil, item, fmt.Errorf("writing the cluster CA: %w", err)
		}
		item.Action, item.NotAfter = Made, ca.Cert.NotAfter
		return ca, item, nil
	}
	ca, err := LoadCA(l, now)
	if err != nil {
		return nil, item, err
	}
	item.Action, item.NotAfter, item.Subject = Kept, ca.Cert.NotAfter, subject(ca.Cert)
	return ca, item, nil
}

// LoadCA reads the cluster CA and checks it can sign: ca.key is ca.crt's,
// ca.crt is a CA and has not expired. Any fault is ErrBadCA, with how to
// start over.
func LoadCA(l statedir.Layout, now time.Time) (*KeyPair, error) {
	bad := func(err error) error {
		return fmt.Errorf("%w: %w; %s", ErrBadCA, err, startOver(l))
	}
	cert, err := LoadCert(l.CACert())
	if err != nil {
		return nil, bad(err)
	}
	if !cert.IsCA {
		return nil, bad(fmt.Errorf("%s is not a CA certificate (%s)", l.CACert(), subject(cert)))
	}
	if now.After(cert.NotAfter) {
		return nil, bad(fmt.Errorf("the CA %s expired on %s", l.CACert(), cert.NotAfter.Format(time.DateOnly)))
	}
	ca, err := LoadKeyPair(l.CACert(), l.CAKey())
	if err != nil {
		return nil, bad(err)
	}
	return ca, nil
}

// issue keeps or issues each credential's certificate, then writes its
// kubeconfig. The keys to make are made side by side (an RSA 2048 key takes
// tens of milliseconds), then written in order.
func issue(o Options, ca *KeyPair, creds []Credential, res *Result) error {
	t := now(o)
	server := serverURL(o)
	res.Server = server
	type job struct {
		item   Item
		kp     *KeyPair
		reason string
	}
	jobs := make([]job, len(creds))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range creds {
		certPath, keyPath := o.Layout.PKICert(c.Name), o.Layout.PKIKey(c.Name)
		j := &jobs[i]
		j.item = Item{Name: c.Name, Purpose: c.Purpose, Files: []string{certPath, keyPath}}
		kp, err := LoadKeyPair(certPath, keyPath)
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			j.item.Action = Made
		case err != nil:
			j.item.Action, j.reason = Renewed, err.Error()
		default:
			j.reason = stale(kp.Cert, ca, c.Spec, t)
			j.item.Action, j.kp = Kept, kp
			if j.reason != "" {
				j.item.Action, j.kp = Renewed, nil
			}
		}
		if j.item.Action != Kept {
			spec := c.Spec
			spec.NotBefore = t
			g.Go(func() error {
				kp, err := ca.Issue(spec)
				j.kp = kp
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, c := range creds {
		j := &jobs[i]
		if j.item.Action != Kept {
			if err := j.kp.Write(j.item.Files[0], j.item.Files[1]); err != nil {
				return fmt.Errorf("writing the certificate %s: %w", c.Name, err)
			}
		}
		j.item.Reason, j.item.Subject, j.item.NotAfter = j.reason, subject(j.kp.Cert), j.kp.Cert.NotAfter
		res.Certificates = append(res.Certificates, j.item)
		if c.Kubeconfig != "" {
			kc, err := writeKubeconfig(o.Layout.Kubeconfig(c.Kubeconfig), c.Kubeconfig, withHost(server, c.ServerHost), ca, j.kp)
			if err != nil {
				return err
			}
			res.Kubeconfigs = append(res.Kubeconfigs, kc)
		}
	}
	return nil
}

// withHost is server with its host replaced by host (if not empty).
func withHost(server, host string) string {
	if host == "" {
		return server
	}
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

// stale says why a certificate must be issued again, or "" to keep it.
func stale(cert *x509.Certificate, ca *KeyPair, want Spec, now time.Time) string {
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: want.Usages, CurrentTime: now}); err != nil {
		return "it does not verify against ca.crt: " + err.Error()
	}
	if cert.Subject.CommonName != want.CommonName || !slices.Equal(cert.Subject.Organization, want.Organization) {
		return fmt.Sprintf("its subject is %s, want %s", subject(cert), subjectOf(want.CommonName, want.Organization))
	}
	if !slices.Equal(cert.ExtKeyUsage, want.Usages) {
		return "its usages are not the ones wanted"
	}
	var missing []string
	for _, d := range want.DNSNames {
		if !slices.Contains(cert.DNSNames, d) {
			missing = append(missing, d)
		}
	}
	for _, ip := range want.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	if len(missing) > 0 {
		return "its SANs lack " + strings.Join(missing, ", ")
	}
	if cert.NotAfter.Sub(now) < RenewBefore {
		return fmt.Sprintf("it expires on %s, in less than %d days", cert.NotAfter.Format(time.DateOnly), int(RenewBefore.Hours()/24))
	}
	return ""
}

func subject(c *x509.Certificate) string {
	return subjectOf(c.Subject.CommonName, c.Subject.Organization)
}

func subjectOf(cn string, o []string) string {
	s := "CN=" + cn
	for _, g := range o {
		s += ", O=" + g
	}
	return s
}

// SANs lists a certificate's subject alternative names, as openssl prints
// them: DNS:name, IP Address:ip.
func SANs(c *x509.Certificate) []string {
	var out []string
	for _, d := range c.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP Address:"+ip.String())
	}
	return out
}
