package authn_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/pki"
)

// issued is a CA of the test and certificates it signed.
type issued struct {
	ca    *pki.KeyPair
	certs map[string]*pki.KeyPair
}

func newIssued(t *testing.T) issued {
	t.Helper()
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.NewCA("kubernetes") // same name, another key
	if err != nil {
		t.Fatal(err)
	}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	specs := map[string]struct {
		ca   *pki.KeyPair
		spec pki.Spec
	}{
		"admin":   {ca, pki.Spec{CommonName: "admin", Organization: []string{authn.GroupMasters}, Usages: client}},
		"node-1":  {ca, pki.Spec{CommonName: "system:node:node-1", Organization: []string{authn.GroupNodes}, Usages: client}},
		"foreign": {foreign, pki.Spec{CommonName: "admin", Organization: []string{authn.GroupMasters}, Usages: client}},
		"expired": {ca, pki.Spec{CommonName: "admin", Organization: []string{authn.GroupMasters}, Usages: client,
			NotBefore: time.Now().Add(-48 * time.Hour), Validity: 24 * time.Hour}},
		"not yet": {ca, pki.Spec{CommonName: "admin", Usages: client, NotBefore: time.Now().Add(24 * time.Hour)}},
		"serving": {ca, pki.Spec{CommonName: "kube-apiserver", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
		"expiring": {ca, pki.Spec{CommonName: "admin", Organization: []string{authn.GroupMasters}, Usages: client,
			NotBefore: time.Now().Add(-time.Hour), Validity: time.Hour + 30*time.Second}},
	}
	out := issued{ca: ca, certs: map[string]*pki.KeyPair{}}
	for name, s := range specs {
		kp, err := s.ca.Issue(s.spec)
		if err != nil {
			t.Fatalf("issuing %s: %v", name, err)
		}
		out.certs[name] = kp
	}
	return out
}

// request is a request that came over TLS with the client certificate of
// name ("" for none).
func (is issued) request(name string) *http.Request {
	r := httptest.NewRequest("GET", "https://127.0.0.1:6443/api", nil)
	r.TLS = &tls.ConnectionState{}
	if name != "" {
		r.TLS.PeerCertificates = []*x509.Certificate{is.certs[name].Cert}
	}
	return r
}

func TestX509_AuthenticateRequest(t *testing.T) {
	is := newIssued(t)
	a := authn.NewX509(is.ca.Pool())
	tests := []struct {
		name   string
		req    *http.Request
		ok     bool
		user   string
		groups []string
		err    string // "" for no error
	}{
		{"admin", is.request("admin"), true, "admin", []string{authn.GroupMasters, authn.GroupAuthenticated}, ""},
		{"node", is.request("node-1"), true, "system:node:node-1", []string{authn.GroupNodes, authn.GroupAuthenticated}, ""},
		{"no certificate", is.request(""), false, "", nil, ""},
		{"no TLS", httptest.NewRequest("GET", "http://127.0.0.1/api", nil), false, "", nil, ""},
		{"another CA", is.request("foreign"), false, "", nil, "x509: certificate signed by unknown authority"},
		{"expired", is.request("expired"), false, "", nil, "x509: certificate has expired or is not yet valid"},
		{"not yet valid", is.request("not yet"), false, "", nil, "x509: certificate has expired or is not yet valid"},
		{"a serving certificate as a client's", is.request("serving"), false, "", nil, "x509: certificate specifies an incompatible key usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok, err := a.AuthenticateRequest(tt.req)
			if tt.err != "" {
				if !errors.Is(err, authn.ErrInvalidCertificate) || !strings.Contains(err.Error(), tt.err) ||
					!strings.HasPrefix(err.Error(), "verifying certificate SN=") {
					t.Fatalf("err = %v, want ErrInvalidCertificate saying \"verifying certificate SN=... failed: %s\"", err, tt.err)
				}
				if ok || u.Name != "" {
					t.Errorf("a refused certificate authenticated %+v", u)
				}
				return
			}
			if err != nil || ok != tt.ok || u.Name != tt.user || !slices.Equal(u.Groups, tt.groups) {
				t.Errorf("= %+v, %v, %v; want %s in %v, %v, no error", u, ok, err, tt.user, tt.groups, tt.ok)
			}
		})
	}
}

// TestX509_RemembersOnlyWhatStillHolds: a verified chain is remembered
// (VerifiedFor), but never past its NotAfter, and a refusal is never
// remembered as a success.
func TestX509_RemembersOnlyWhatStillHolds(t *testing.T) {
	is := newIssued(t)
	start := time.Now()
	tests := []struct {
		name  string
		cert  string
		after time.Duration // the second request, this long after the first
		ok    bool
		err   string
	}{
		{"the same chain again, soon", "admin", time.Second, true, ""},
		{"the same chain after VerifiedFor: verified again", "admin", authn.VerifiedFor + time.Second, true, ""},
		{"a chain that expired while remembered", "expiring", 45 * time.Second, false, "x509: certificate has expired or is not yet valid"},
		{"another CA's, after a success", "foreign", time.Second, false, "x509: certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := authn.NewX509(is.ca.Pool())
			now := start
			a.SetClock(func() time.Time { return now })
			if _, ok, err := a.AuthenticateRequest(is.request("admin")); !ok || err != nil {
				t.Fatalf("admin: %v, %v", ok, err)
			}
			if tt.cert == "expiring" {
				if _, ok, err := a.AuthenticateRequest(is.request(tt.cert)); !ok || err != nil {
					t.Fatalf("%s, while valid: %v, %v", tt.cert, ok, err)
				}
			}
			now = start.Add(tt.after)
			u, ok, err := a.AuthenticateRequest(is.request(tt.cert))
			if ok != tt.ok || (tt.err == "" && err != nil) || (tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err))) {
				t.Errorf("%s %s later: %+v, %v, %v; want ok=%v, error %q", tt.cert, tt.after, u, ok, err, tt.ok, tt.err)
			}
		})
	}
}

func TestX509_CertificateID(t *testing.T) {
	is := newIssued(t)
	c := is.certs["admin"].Cert
	id := authn.CertificateID(c)
	if !strings.HasPrefix(id, "SN="+c.SerialNumber.String()+", SKID=") || !strings.Contains(id, ", AKID=") {
		t.Errorf("CertificateID = %q, want kube-apiserver's SN=..., SKID=..., AKID=...", id)
	}
	// The AKID is the CA's SKID, in colon-separated upper-case hex.
	if want := strings.ToUpper(strings.Join(hexBytes(is.ca.Cert.SubjectKeyId), ":")); !strings.HasSuffix(id, "AKID="+want) {
		t.Errorf("CertificateID = %q, want it to end with AKID=%s", id, want)
	}
}

func hexBytes(b []byte) []string {
	const digits = "0123456789abcdef"
	out := make([]string, len(b))
	for i, x := range b {
		out[i] = string([]byte{digits[x>>4], digits[x&15]})
	}
	return out
}

func TestTokens_AuthenticateRequest(t *testing.T) {
	tokens := writeTokens(t)
	tests := []struct {
		name, header string
		ok           bool
		user         string
		err          error
	}{
		{"no header", "", false, "", nil},
		{"basic auth", "Basic YWRtaW46YWRtaW4=", false, "", nil},
		{"bearer without a token", "Bearer ", false, "", nil},
		{"known token", "Bearer t-admin", true, "admin", nil},
		{"scheme in lower case", "bearer t-dev", true, "developer", nil},
		{"unknown token", "Bearer not-a-token", false, "", authn.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			u, ok, err := tokens.AuthenticateRequest(r)
			if !errors.Is(err, tt.err) || ok != tt.ok || u.Name != tt.user {
				t.Errorf("= %+v, %v, %v; want %q, %v, %v", u, ok, err, tt.user, tt.ok, tt.err)
			}
			if ok && !u.InGroup(authn.GroupAuthenticated) {
				t.Errorf("%s is not in %s", u.Name, authn.GroupAuthenticated)
			}
		})
	}
}

func writeTokens(t *testing.T) *authn.Tokens {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	err := authn.WriteFile(path, []authn.Entry{
		{Token: "t-admin", User: authn.User{Name: "admin", UID: "1", Groups: []string{authn.GroupMasters}}},
		{Token: "t-dev", User: authn.User{Name: "developer", UID: "2", Groups: []string{"developers"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := authn.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func TestUnion(t *testing.T) {
	is := newIssued(t)
	u := authn.Union(authn.NewX509(is.ca.Pool()), writeTokens(t))
	tests := []struct {
		name, cert, token string
		ok                bool
		user              string
		errs              []error
	}{
		{"certificate", "admin", "", true, "admin", nil},
		{"token", "", "t-dev", true, "developer", nil},
		{"certificate first", "node-1", "t-dev", true, "system:node:node-1", nil},
		{"a good certificate, a bad token", "admin", "nope", true, "admin", nil},
		{"a bad certificate, a good token", "foreign", "t-dev", true, "developer", nil},
		{"a bad certificate alone", "foreign", "", false, "", []error{authn.ErrInvalidCertificate}},
		{"both bad", "expired", "nope", false, "", []error{authn.ErrInvalidCertificate, authn.ErrInvalidToken}},
		{"a bad token alone", "", "nope", false, "", []error{authn.ErrInvalidToken}},
		{"nothing: anonymous", "", "", false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := is.request(tt.cert)
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			got, ok, err := u.AuthenticateRequest(r)
			if ok != tt.ok || got.Name != tt.user {
				t.Errorf("= %+v, %v, %v; want %q, %v", got, ok, err, tt.user, tt.ok)
			}
			if len(tt.errs) == 0 && err != nil {
				t.Errorf("err = %v, want none", err)
			}
			for _, want := range tt.errs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to hold %v", err, want)
				}
			}
		})
	}
}
