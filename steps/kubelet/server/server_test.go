package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/server"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// host is a kubelet with one pod, web, whose log is "one\ntwo\n".
type host struct {
	mu   sync.Mutex
	opts []kubelet.LogsOptions
}

func (h *host) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	switch {
	case ns == "default" && name == "web":
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web"}}}}, nil
	case name == "elsewhere":
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "web"}}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (h *host) Logs(_ context.Context, _ *corev1.Pod, w io.Writer, opts kubelet.LogsOptions) (*kubelet.LogsSource, error) {
	h.mu.Lock()
	h.opts = append(h.opts, opts)
	h.mu.Unlock()
	if opts.Previous {
		return nil, fmt.Errorf("%w: previous terminated container \"web\" in pod \"web\" not found", kubelet.ErrNoLogs)
	}
	_, err := io.WriteString(w, "one\ntwo\n")
	return &kubelet.LogsSource{}, err
}

func (h *host) Exec(context.Context, *corev1.Pod, string, []string, kubelet.ExecOptions) (int, error) {
	return 0, errors.New("not in this test")
}

// allowList allows the users it names, and records what it was asked.
type allowList struct {
	mu    sync.Mutex
	users map[string]bool
	asked []authorizer.Attributes
}

func (a *allowList) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, attrs)
	if attrs.GetUser().GetName() == "admin" {
		return authorizer.DecisionNoOpinion, "", errors.New("the API server is away")
	}
	if a.users[attrs.GetUser().GetName()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC rule", nil
}

// TestServer is the kubelet API's gate and its answers, over TLS with the
// lab's real certificates: 401 without a certificate the CA signed, the
// kubelet's 403 text when the API server says no, and the kubelet's
// errors for bad requests.
func TestServer(t *testing.T) {
	l := statedir.Layout{Dir: t.TempDir()}
	if _, err := pki.Ensure(pki.Options{Layout: l, Nodes: []pki.Node{{Name: "node-1"}}}); err != nil {
		t.Fatal(err)
	}
	other := statedir.Layout{Dir: t.TempDir()}
	if _, err := pki.Ensure(pki.Options{Layout: other}); err != nil {
		t.Fatal(err)
	}
	cas, err := pki.ClientCAs(l)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{}
	authz := &allowList{users: map[string]bool{pki.KubeletClientCommonName: true}}
	srv, err := server.New(server.Config{Node: "node-1", Host: h, Authorizer: authz, ClientCAs: cas})
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := pki.KubeletTLSConfig(l, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.TLS = tlsConfig
	ts.StartTLS()
	defer ts.Close()

	client := func(layout statedir.Layout, identity string) *http.Client {
		ca, err := os.ReadFile(l.CACert())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		cfg := &tls.Config{RootCAs: pool}
		if identity != "" {
			kp, err := tls.LoadX509KeyPair(layout.PKICert(identity), layout.PKIKey(identity))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	tests := []struct {
		name         string
		layout       statedir.Layout
		identity     string
		method, path string
		code         int
		body         string
	}{
		{"logs", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/web/web", 200, "one\ntwo\n"},
		{"no certificate", l, "", "GET", "/containerLogs/default/web/web", 401, "Unauthorized"},
		{"a certificate of another CA", other, "admin", "GET", "/containerLogs/default/web/web", 401, "Unauthorized"},
		{"the API server says no", l, "developer", "GET", "/containerLogs/default/web/web", 403, "Forbidden (user=developer, verb=get, resource=nodes, subresource(s)=[proxy])\n"},
		{"exec is create", l, "developer", "POST", "/exec/default/web/web?command=ls&output=1", 403, "Forbidden (user=developer, verb=create, resource=nodes, subresource(s)=[proxy])\n"},
		{"the API server does not answer", l, "admin", "GET", "/containerLogs/default/web/web", 500, "Authorization error (user=admin, verb=get, resource=nodes, subresource=proxy)"},
		{"a missing pod", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/nope/web", 404, `pod "nope" does not exist`},
		{"another node's pod", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/elsewhere/web", 404, `pod "elsewhere" does not exist`},
		{"a missing container", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"a negative tailLines", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/web/web?tailLines=-1", 422, `{"message": "Invalid request."}`},
		{"tailLines not a number", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/web/web?tailLines=x", 400, `{"message": "Unable to decode query."}`},
		{"no previous run", l, "apiserver-kubelet-client", "GET", "/containerLogs/default/web/web?previous=true", 400, `previous terminated container "web" in pod "web" not found`},
		{"exec without a stream", l, "apiserver-kubelet-client", "POST", "/exec/default/web/web?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"exec in a missing container", l, "apiserver-kubelet-client", "POST", "/exec/default/web/nope?command=ls&output=1", 404, `container not found ("nope")`},
		{"a path not served", l, "apiserver-kubelet-client", "GET", "/pods", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client(tt.layout, tt.identity).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.body) || (tt.code < 300 && string(body) != tt.body) {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, tt.code, tt.body)
			}
		})
	}

	// what the kubelet asked: nodes/proxy of its own Node, verb from the method
	authz.mu.Lock()
	a := authz.asked[0]
	authz.mu.Unlock()
	if a.GetResource() != "nodes" || a.GetSubresource() != "proxy" || a.GetName() != "node-1" || a.GetVerb() != "get" || a.GetAPIVersion() != "v1" || !a.IsResourceRequest() {
		t.Errorf("asked %+v, want get nodes/proxy node-1", a)
	}
	// and the query as the kubelet decodes it
	h.opts = nil
	req, _ := http.NewRequest("GET", ts.URL+"/containerLogs/default/web/web?follow&tailLines=3&limitBytes=10&timestamps=true&sinceSeconds=60", nil)
	resp, err := client(l, "apiserver-kubelet-client").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(h.opts) != 1 {
		t.Fatalf("Logs called %d times", len(h.opts))
	}
	o := h.opts[0]
	if !o.Follow || *o.TailLines != 3 || *o.LimitBytes != 10 || !o.TimestampPrefix || o.SinceTime == nil || o.Container != "web" {
		t.Errorf("options %+v", o)
	}
}

// TestNew_Refuses is a server that could not do its job.
func TestNew_Refuses(t *testing.T) {
	pool := x509.NewCertPool()
	tests := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no host", server.Config{Authorizer: &allowList{}, ClientCAs: pool}, "no Host"},
		{"no authorizer", server.Config{Host: &host{}, ClientCAs: pool}, "no Authorizer"},
		{"no CA", server.Config{Host: &host{}, Authorizer: &allowList{}}, "run `podlab init`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := server.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
