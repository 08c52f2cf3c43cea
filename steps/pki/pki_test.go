package pki_test

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// labHosts are the API server's extra SANs in the tests: a host name and an
// address (TEST-NET-1, nobody's).
var labHosts = []string{"lab-host", "192.0.2.10"}

func options(t *testing.T) pki.Options {
	t.Helper()
	return pki.Options{
		Layout:         statedir.Layout{Dir: t.TempDir()},
		APIServerHosts: labHosts,
		Nodes:          []pki.Node{{Name: "node-1", Hosts: labHosts}},
	}
}

func ensure(t *testing.T, o pki.Options) *pki.Result {
	t.Helper()
	res, err := pki.Ensure(o)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return res
}

var (
	client  = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	serving = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
)

// kubeadmMade checks what kubeadm's pkiutil gives every certificate with
// its default encryptionAlgorithm RSA-2048: an RSA key of 2048 bits, a
// SHA-256 RSA signature, the key usages given, valid from
// CertificateBackdate (5 minutes) before now.
func kubeadmMade(t *testing.T, kp *pki.KeyPair, usage x509.KeyUsage) {
	t.Helper()
	c := kp.Cert
	if k, ok := c.PublicKey.(*rsa.PublicKey); !ok || k.N.BitLen() != 2048 {
		t.Errorf("%s: public key %T, want RSA 2048 (kubeadm's default)", c.Subject.CommonName, c.PublicKey)
	}
	if _, ok := kp.Key.(*rsa.PrivateKey); !ok {
		t.Errorf("%s: private key %T, want RSA", c.Subject.CommonName, kp.Key)
	}
	if c.SignatureAlgorithm != x509.SHA256WithRSA {
		t.Errorf("%s: signed %s, want SHA256-RSA", c.Subject.CommonName, c.SignatureAlgorithm)
	}
	if c.KeyUsage != usage {
		t.Errorf("%s: key usage %b, want %b", c.Subject.CommonName, c.KeyUsage, usage)
	}
	if d := time.Since(c.NotBefore); d < pki.Backdate || d > pki.Backdate+time.Minute {
		t.Errorf("%s: valid from %s, want 5 minutes before now", c.Subject.CommonName, c.NotBefore)
	}
	if c.SerialNumber.Sign() <= 0 {
		t.Errorf("%s: serial %s, want positive", c.Subject.CommonName, c.SerialNumber)
	}
}

func TestEnsure_Certificates(t *testing.T) {
	o := options(t)
	res := ensure(t, o)
	l := o.Layout
	ca, err := pki.LoadKeyPair(l.CACert(), l.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != pki.CACommonName {
		t.Errorf("ca.crt: IsCA %v, subject %v; want a CA called %s", ca.Cert.IsCA, ca.Cert.Subject, pki.CACommonName)
	}
	if got := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore); got != pki.CAValidity+pki.Backdate {
		t.Errorf("the CA is valid %s, want 10 years and kubeadm's 5 minutes before", got)
	}
	kubeadmMade(t, ca, x509.KeyUsageKeyEncipherment|x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign)
	if !slices.Equal(ca.Cert.DNSNames, []string{pki.CACommonName}) {
		t.Errorf("the CA's DNS SANs %v, want its name, as kubeadm's", ca.Cert.DNSNames)
	}
	tests := []struct {
		name   string
		cn     string
		o      []string
		usages []x509.ExtKeyUsage
		dns    []string
		ips    []string
	}{
		{"apiserver", "kube-apiserver", nil, serving,
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "lab-host"},
			[]string{"127.0.0.1", "::1", "10.96.0.1", "192.0.2.10"}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil, client, nil, nil},
		{"admin", "admin", []string{"system:masters"}, client, nil, nil},
		{"kube-scheduler", "system:kube-scheduler", nil, client, nil, nil},
		{"network-agent", "network-agent", nil, client, nil, nil},
		{"kube-controller-manager", "system:kube-controller-manager", nil, client, nil, nil},
		{"developer", "developer", []string{"developers"}, client, nil, nil},
		{"viewer", "viewer", []string{"viewers"}, client, nil, nil},
		{"node-1", "system:node:node-1", []string{"system:nodes"}, client, nil, nil},
		{"kubelet-node-1", "system:node:node-1", []string{"system:nodes"}, serving, []string{"node-1", "lab-host"}, []string{"127.0.0.1", "192.0.2.10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := pki.LoadKeyPair(l.PKICert(tt.name), l.PKIKey(tt.name))
			if err != nil {
				t.Fatal(err)
			}
			c := kp.Cert
			if c.Subject.CommonName != tt.cn || !slices.Equal(c.Subject.Organization, tt.o) {
				t.Errorf("subject %v, want CN=%s O=%v", c.Subject, tt.cn, tt.o)
			}
			if !slices.Equal(c.ExtKeyUsage, tt.usages) || c.IsCA {
				t.Errorf("usages %v (CA %v), want %v and not a CA", c.ExtKeyUsage, c.IsCA, tt.usages)
			}
			if !slices.Equal(c.DNSNames, tt.dns) {
				t.Errorf("DNS SANs %v, want %v", c.DNSNames, tt.dns)
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tt.ips) {
				t.Errorf("IP SANs %v, want %v", ips, tt.ips)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: tt.usages}); err != nil {
				t.Errorf("does not verify against ca.crt: %v", err)
			}
			if got := c.NotAfter.Sub(c.NotBefore); got != pki.CertValidity+pki.Backdate {
				t.Errorf("valid for %s, want one year and kubeadm's 5 minutes before", got)
			}
			kubeadmMade(t, kp, x509.KeyUsageKeyEncipherment|x509.KeyUsageDigitalSignature)
			for _, ip := range tt.ips {
				if err := c.VerifyHostname(ip); err != nil {
					t.Errorf("VerifyHostname(%s): %v", ip, err)
				}
			}
		})
	}
	// Modes: keys 0600, certificates 0644, directories 0700.
	modes := map[string]os.FileMode{l.PKIDir(): 0o700 | os.ModeDir, l.KubeconfigsDir(): 0o700 | os.ModeDir, l.CAKey(): 0o600, l.CACert(): 0o644}
	for _, tt := range tests {
		modes[l.PKIKey(tt.name)], modes[l.PKICert(tt.name)] = 0o600, 0o644
	}
	for path, want := range modes {
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
	ents, _ := os.ReadDir(l.PKIDir())
	if len(ents) != 2*(len(tests)+1) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("pki/ holds %v, want a .crt and a .key for ca and each of the %d certificates (no temporary files)", names, len(tests))
	}
	for _, it := range append(res.Certificates, res.Kubeconfigs...) {
		if it.Action != pki.Made {
			t.Errorf("%s: %s, want made on a first run", it.Name, it.Action)
		}
	}
}

func TestEnsure_Kubeconfigs(t *testing.T) {
	o := options(t)
	res := ensure(t, o)
	l := o.Layout
	caPEM, _ := os.ReadFile(l.CACert())
	tests := []struct{ name, user string }{
		{"admin", "admin"},
		{"kube-scheduler", "system:kube-scheduler"},
		{"kube-controller-manager", "system:kube-controller-manager"},
		{"node-1", "system:node:node-1"},
		{"developer", "developer"},
		{"viewer", "viewer"},
		{"network-agent", "network-agent"},
	}
	if len(res.Kubeconfigs) != len(tests) {
		t.Errorf("made %d kubeconfigs, want %d", len(res.Kubeconfigs), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := l.Kubeconfig(tt.name)
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v, mode %v; want mode 0600", path, err, fi.Mode())
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ctx := cfg.Contexts[cfg.CurrentContext]
			if cfg.CurrentContext != tt.user+"@podlab" || ctx == nil || ctx.Cluster != "podlab" || ctx.AuthInfo != tt.user {
				t.Fatalf("current context %q = %+v, want %s@podlab: cluster podlab, user %s", cfg.CurrentContext, ctx, tt.user, tt.user)
			}
			cluster := cfg.Clusters["podlab"]
			if cluster.Server != "https://127.0.0.1:6443" || !bytes.Equal(cluster.CertificateAuthorityData, caPEM) {
				t.Errorf("cluster: server %s, CA data equal to ca.crt %v", cluster.Server, bytes.Equal(cluster.CertificateAuthorityData, caPEM))
			}
			certPEM, _ := os.ReadFile(l.PKICert(tt.name))
			keyPEM, _ := os.ReadFile(l.PKIKey(tt.name))
			user := cfg.AuthInfos[tt.user]
			if !bytes.Equal(user.ClientCertificateData, certPEM) || !bytes.Equal(user.ClientKeyData, keyPEM) {
				t.Errorf("user %s does not embed pki/%s.crt and .key", tt.user, tt.name)
			}
			rc, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://127.0.0.1:6443" || !bytes.Equal(rc.TLSClientConfig.CAData, caPEM) ||
				!bytes.Equal(rc.TLSClientConfig.CertData, certPEM) || !bytes.Equal(rc.TLSClientConfig.KeyData, keyPEM) || rc.TLSClientConfig.Insecure {
				t.Errorf("rest.Config: host %s, TLS %+v; want the CA, certificate and key of the files", rc.Host, rc.TLSClientConfig)
			}
		})
	}
}

func TestEnsure_Idempotent(t *testing.T) {
	o := options(t)
	ensure(t, o)
	l := o.Layout
	snapshot := func() map[string][]byte {
		out := map[string][]byte{}
		for _, dir := range []string{l.PKIDir(), l.KubeconfigsDir()} {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
				out[filepath.Join(dir, e.Name())] = b
			}
		}
		return out
	}
	before := snapshot()
	res := ensure(t, o)
	for _, it := range append(res.Certificates, res.Kubeconfigs...) {
		if it.Action != pki.Kept {
			t.Errorf("second run: %s %s (%s), want kept", it.Name, it.Action, it.Reason)
		}
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Errorf("second run: %d files, want the same %d", len(after), len(before))
	}
	for path, b := range before {
		if !bytes.Equal(after[path], b) {
			t.Errorf("second run changed %s", path)
		}
	}

	actions := func(res *pki.Result) map[string]pki.Action {
		out := map[string]pki.Action{}
		for _, it := range res.Certificates {
			out[it.Name] = it.Action
		}
		for _, it := range res.Kubeconfigs {
			out[it.Name+".kubeconfig"] = it.Action
		}
		return out
	}
	t.Run("a new SAN re-issues the API server's certificate only", func(t *testing.T) {
		o := o
		o.APIServerHosts = append(slices.Clone(labHosts), "198.51.100.7")
		res := ensure(t, o)
		for name, a := range actions(res) {
			if want := map[bool]pki.Action{true: pki.Renewed, false: pki.Kept}[name == "apiserver"]; a != want {
				t.Errorf("%s: %s, want %s", name, a, want)
			}
		}
		if !bytes.Equal(mustRead(t, l.CACert()), before[l.CACert()]) {
			t.Error("the CA changed")
		}
		kp, _ := pki.LoadKeyPair(l.PKICert("apiserver"), l.PKIKey("apiserver"))
		if err := kp.Cert.VerifyHostname("198.51.100.7"); err != nil {
			t.Error(err)
		}
		// A SAN the certificate has but is no longer asked for keeps it.
		if got := actions(ensure(t, options_(o, labHosts))); got["apiserver"] != pki.Kept {
			t.Errorf("fewer SANs: apiserver %s, want kept", got["apiserver"])
		}
	})
	t.Run("certificates near their end are re-issued, the CA kept", func(t *testing.T) {
		o := options(t)
		ensure(t, o)
		o.Now = func() time.Time { return time.Now().Add(pki.CertValidity - pki.RenewBefore + 24*time.Hour) }
		res := ensure(t, o)
		for _, it := range res.Certificates {
			want := pki.Renewed
			if it.Name == "ca" {
				want = pki.Kept
			}
			if it.Action != want {
				t.Errorf("%s: %s, want %s", it.Name, it.Action, want)
			}
			if want == pki.Renewed && !strings.Contains(it.Reason, "expires on") {
				t.Errorf("%s: reason %q, want it to say when it expires", it.Name, it.Reason)
			}
		}
		for _, it := range res.Kubeconfigs {
			if it.Action != pki.Updated {
				t.Errorf("%s.kubeconfig: %s, want updated (its certificate is new)", it.Name, it.Action)
			}
		}
	})
	t.Run("another port rewrites the kubeconfigs and keeps the certificates", func(t *testing.T) {
		o := options(t)
		ensure(t, o)
		o.Server = pki.ServerURL(7443)
		for name, a := range actions(ensure(t, o)) {
			want := pki.Kept
			if strings.HasSuffix(name, ".kubeconfig") {
				want = pki.Updated
			}
			if a != want {
				t.Errorf("%s: %s, want %s", name, a, want)
			}
		}
		// Without a server, the kubeconfigs keep the one they name.
		o.Server = ""
		res := ensure(t, o)
		if res.Server != "https://127.0.0.1:7443" {
			t.Errorf("server %s, want the one admin.kubeconfig names", res.Server)
		}
		for _, it := range res.Kubeconfigs {
			if it.Action != pki.Kept {
				t.Errorf("%s.kubeconfig: %s, want kept", it.Name, it.Action)
			}
		}
	})
	t.Run("a damaged certificate or a lost key is re-issued", func(t *testing.T) {
		o := options(t)
		ensure(t, o)
		l := o.Layout
		os.WriteFile(l.PKICert("viewer"), []byte("garbage"), 0o644)
		os.Remove(l.PKIKey("developer"))
		got := actions(ensure(t, o))
		if got["viewer"] != pki.Renewed || got["developer"] != pki.Made || got["admin"] != pki.Kept {
			t.Errorf("viewer %s, developer %s, admin %s; want renewed, made, kept", got["viewer"], got["developer"], got["admin"])
		}
	})
}

// options_ is o with other API server hosts.
func options_(o pki.Options, hosts []string) pki.Options {
	o.APIServerHosts = hosts
	return o
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnsure_BadInput(t *testing.T) {
	otherCA, err := pki.NewCA("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := otherCA.KeyPEM()
	tests := []struct {
		name  string
		spoil func(l statedir.Layout) // after a first Ensure; nil: before any
		opts  func(o *pki.Options)
		is    error
		says  []string
	}{
		{"a damaged ca.crt", func(l statedir.Layout) { os.WriteFile(l.CACert(), []byte("-----BEGIN CERT"), 0o644) }, nil,
			pki.ErrBadCA, []string{"ca.crt", "remove", "pki", "kubeconfigs", "run `podlab init` again"}},
		{"a ca.key that is not ca.crt's", func(l statedir.Layout) { os.WriteFile(l.CAKey(), otherKey, 0o600) }, nil,
			pki.ErrBadCA, []string{"is not the key of the certificate", "run `podlab init` again"}},
		{"no ca.key", func(l statedir.Layout) { os.Remove(l.CAKey()) }, nil,
			pki.ErrBadCA, []string{"ca.key", "run `podlab init` again"}},
		{"a leaf certificate as ca.crt", func(l statedir.Layout) {
			b, _ := os.ReadFile(l.PKICert("admin"))
			os.WriteFile(l.CACert(), b, 0o644)
		}, nil, pki.ErrBadCA, []string{"is not a CA certificate"}},
		{"an expired CA", nil, func(o *pki.Options) {
			o.Now = func() time.Time { return time.Now().Add(pki.CAValidity + time.Hour) }
		}, pki.ErrBadCA, []string{"expired on", "run `podlab init` again"}},
		{"pki is a file", func(l statedir.Layout) {
			os.RemoveAll(l.PKIDir())
			os.WriteFile(l.PKIDir(), nil, 0o644)
		}, nil, nil, []string{"making the directory", "not a file?"}},
		{"a node name that is not a DNS name", nil, func(o *pki.Options) { o.Nodes = []pki.Node{{Name: "Node_1"}} },
			pki.ErrBadNodeName, []string{`"Node_1"`, "lowercase RFC 1123 subdomain"}},
		{"a node named as another identity", nil, func(o *pki.Options) { o.Nodes = []pki.Node{{Name: "admin"}} },
			pki.ErrBadNodeName, []string{"choose another name"}},
		{"a node name that looks like a serving certificate", nil, func(o *pki.Options) { o.Nodes = []pki.Node{{Name: "kubelet-node-1"}} },
			pki.ErrBadNodeName, []string{"choose another name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			if tt.spoil != nil {
				ensure(t, o)
				tt.spoil(o.Layout)
			} else if tt.opts != nil && tt.is == pki.ErrBadCA {
				ensure(t, o)
			}
			if tt.opts != nil {
				tt.opts(&o)
			}
			before := snapshotDir(o.Layout.Dir)
			_, err := pki.Ensure(o)
			if err == nil {
				t.Fatal("Ensure succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %v, want it to say %q", err, s)
				}
			}
			if after := snapshotDir(o.Layout.Dir); !mapsEqual(before, after) {
				t.Errorf("a failed Ensure changed the files:\nbefore %v\nafter  %v", keys(before), keys(after))
			}
		})
	}
}

// snapshotDir maps each file under dir to its content.
func snapshotDir(dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, filepath.Base(k))
	}
	slices.Sort(out)
	return out
}

func TestIssueNode(t *testing.T) {
	o := options(t)
	l := o.Layout
	if _, err := pki.IssueNode(o, pki.Node{Name: "node-2"}); !errors.Is(err, pki.ErrNoCA) || !strings.Contains(err.Error(), "podlab init") {
		t.Errorf("IssueNode before init: %v, want ErrNoCA and a hint to run podlab init", err)
	}
	ensure(t, o)
	caPEM := mustRead(t, l.CACert())
	res, err := pki.IssueNode(o, pki.Node{Name: "node-2", Hosts: []string{"192.0.2.20"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Certificates) != 2 || len(res.Kubeconfigs) != 1 {
		t.Errorf("IssueNode made %d certificates and %d kubeconfigs, want 2 and 1", len(res.Certificates), len(res.Kubeconfigs))
	}
	ca, _ := pki.LoadKeyPair(l.CACert(), l.CAKey())
	for name, usage := range map[string]x509.ExtKeyUsage{"node-2": x509.ExtKeyUsageClientAuth, "kubelet-node-2": x509.ExtKeyUsageServerAuth} {
		kp, err := pki.LoadKeyPair(l.PKICert(name), l.PKIKey(name))
		if err != nil {
			t.Fatal(err)
		}
		if kp.Cert.Subject.CommonName != "system:node:node-2" || !slices.Equal(kp.Cert.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("%s: subject %v", name, kp.Cert.Subject)
		}
		if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	kp, _ := pki.LoadKeyPair(l.PKICert("kubelet-node-2"), l.PKIKey("kubelet-node-2"))
	if !slices.ContainsFunc(kp.Cert.IPAddresses, net.ParseIP("192.0.2.20").Equal) || !slices.Contains(kp.Cert.DNSNames, "node-2") {
		t.Errorf("kubelet-node-2 SANs %v", pki.SANs(kp.Cert))
	}
	if _, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig("node-2")); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(mustRead(t, l.CACert()), caPEM) {
		t.Error("IssueNode changed the CA")
	}
	// A later init keeps node-2's files (it issues only what it is told).
	again, err := pki.IssueNode(o, pki.Node{Name: "node-2", Hosts: []string{"192.0.2.20"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range append(again.Certificates, again.Kubeconfigs...) {
		if it.Action != pki.Kept {
			t.Errorf("IssueNode again: %s %s, want kept", it.Name, it.Action)
		}
	}
}

// TestIssueNode_ServerHost: a joined node's kubeconfig names the API
// server at the lab gateway, on the server's port; the other kubeconfigs
// keep the server's own host, and a later Ensure that knows the node
// keeps its host too.
func TestIssueNode_ServerHost(t *testing.T) {
	o := options(t)
	o.Server = pki.ServerURL(16443)
	ensure(t, o)
	n := pki.Node{Name: "node-2", Hosts: []string{"172.20.5.2"}, ServerHost: "172.20.5.1"}
	if _, err := pki.IssueNode(o, n); err != nil {
		t.Fatal(err)
	}
	server := func(name string) string {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Layout.Kubeconfig(name))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Host
	}
	if got := server("node-2"); got != "https://172.20.5.1:16443" {
		t.Errorf("node-2's kubeconfig names %s, want https://172.20.5.1:16443", got)
	}
	if got := server("admin"); got != "https://127.0.0.1:16443" {
		t.Errorf("admin's kubeconfig names %s", got)
	}
	o.Nodes = append(o.Nodes, n)
	o.Server = pki.ServerURL(26443)
	ensure(t, o)
	if got := server("node-2"); got != "https://172.20.5.1:26443" {
		t.Errorf("after init on another port, node-2's kubeconfig names %s, want https://172.20.5.1:26443", got)
	}
}
