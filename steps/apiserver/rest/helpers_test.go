package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/store"
)

// bearerTokens authenticates "Authorization: Bearer TOKEN" with the token
// file, for these tests (package authn's own request authenticator is the
// PKI work's).
type bearerTokens struct{ t *authn.Tokens }

func (b bearerTokens) AuthenticateRequest(r *http.Request) (authn.User, bool, error) {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") {
		return authn.User{}, false, nil
	}
	u, ok := b.t.Authenticate(strings.TrimPrefix(h, "Bearer "))
	if !ok {
		return authn.User{}, false, errors.New("invalid bearer token")
	}
	return u, true, nil
}

// lab is a state directory's API server behind an HTTPS test server.
type lab struct {
	t      testing.TB
	s      *apiserver.Server
	srv    *httptest.Server
	tokens *authn.Tokens

	mu       sync.Mutex
	requests []string // method and URI of each request, for tests that look at what clients asked
	// hold, when set, keeps every watch request waiting until it is closed:
	// a client that is away for a while
	hold chan struct{}
	// ends cancels the watches being served: their streams end cleanly,
	// as at timeoutSeconds
	ends []context.CancelFunc
}

// endWatches ends every watch being served.
func (l *lab) endWatches() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, end := range l.ends {
		end()
	}
	l.ends = nil
}

// holdWatches makes new watch requests wait until the returned function
// is called.
func (l *lab) holdWatches() (release func()) {
	ch := make(chan struct{})
	l.mu.Lock()
	l.hold = ch
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.hold = nil
		l.mu.Unlock()
		close(ch)
	}
}

// newLab is a lab on the bbolt file, or on a real etcd started for the
// test when PODLAB_TEST_STORE=etcd.
func newLab(t testing.TB, storeOpts []store.Option, opts ...Option) *lab {
	t.Helper()
	return newLabOn(t, testenv.WantEtcd(), storeOpts, opts...)
}

func newLabOn(t testing.TB, onEtcd bool, storeOpts []store.Option, opts ...Option) *lab {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	var s *apiserver.Server
	var err error
	if onEtcd {
		e := testenv.Etcd(t)
		s, err = apiserver.OpenEtcd(context.Background(), dir, store.EtcdConfig{Endpoints: []string{e.Endpoint}}, storeOpts)
	} else {
		s, err = apiserver.OpenWith(dir, storeOpts)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	l := &lab{t: t, s: s, tokens: s.Tokens()}
	h := New(s, append([]Option{WithAuthenticator("token file", bearerTokens{s.Tokens()})}, opts...)...)
	l.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.requests = append(l.requests, r.Method+" "+r.URL.RequestURI())
		hold := l.hold
		l.mu.Unlock()
		if r.URL.Query().Get("watch") != "" {
			if hold != nil {
				<-hold
			}
			wctx, end := context.WithCancel(r.Context())
			defer end()
			l.mu.Lock()
			l.ends = append(l.ends, end)
			l.mu.Unlock()
			r = r.WithContext(wctx)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		l.srv.CloseClientConnections()
		l.srv.Close()
		s.Close()
	})
	return l
}

func (l *lab) token(user string) string {
	l.t.Helper()
	tok, err := l.tokens.TokenFor(user)
	if err != nil {
		l.t.Fatal(err)
	}
	return tok
}

// config is a client-go rest config for user, trusting the test server.
func (l *lab) config(user string) *restclient.Config {
	return &restclient.Config{Host: l.srv.URL, BearerToken: l.token(user), QPS: -1,
		TLSClientConfig: restclient.TLSClientConfig{CAData: certPEM(l.srv)}}
}

func (l *lab) clientset(user string) *kubernetes.Clientset {
	l.t.Helper()
	cs, err := kubernetes.NewForConfig(l.config(user))
	if err != nil {
		l.t.Fatal(err)
	}
	return cs
}

// do sends a raw request as user ("" for none) and returns the status and
// body.
func (l *lab) do(user, method, path, contentType string, body []byte, header ...string) (int, []byte, http.Header) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+l.token(user))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := l.srv.Client().Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header
}

func (l *lab) asked(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.requests {
		if strings.Contains(r, substr) {
			return true
		}
	}
	return false
}

func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// status decodes a Status body.
func status(t testing.TB, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("not a Status: %v\n%s", err, body)
	}
	return st
}
