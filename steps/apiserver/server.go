package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/nodeauthorizer"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// Server is podlab's kube-apiserver: the gate in front of the store. It is
// not a network server: clients call it in-process, each podlab process
// opening the same store file, which the store locks for the length of
// each transaction.
type Server struct {
	store  *store.Store
	tokens *authn.Tokens
	psa    *admission.PodSecurityAdmission
	now    func() time.Time
	// nodeAuthz is the Node authorizer, asked before RBAC.
	nodeAuthz *nodeauthorizer.Authorizer

	// The RBAC policy, decoded from the store, and the fingerprint of the
	// RBAC keys it was decoded from: it is decoded again only when a Role,
	// ClusterRole or binding changed (kube-apiserver keeps it in an
	// informer cache, fed by a watch, for the same reason). policyRev is a
	// store revision at which the policy is known to be current, so that
	// the fingerprint need not be taken again (see policyIn).
	mu        sync.Mutex
	policy    *rbac.Policy
	policyKey policyFingerprint
	policyRev int64
	// On etcd: the watch that keeps the policy current (pw), and the
	// generation the cached policy was decoded at.
	pw        *policyWatch
	policyGen int64
	stop      context.CancelFunc // ends the watch

	// namespaces decoded before, by name, with the revision they were
	// decoded at: every namespaced create reads its namespace.
	nsMu    sync.Mutex
	nsCache map[string]*corev1.Namespace

	// managed makes the field managers of managedFields, at the first
	// write that needs them.
	managed fieldManagers

	// tolerations configures the DefaultTolerationSeconds admission plugin.
	tolerations admission.TolerationSeconds
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock used for creationTimestamp, deletionTimestamp
// and conditions (tests use a fixed one).
func WithClock(now func() time.Time) Option {
	return func(s *Server) { s.now = now }
}

// WithDefaultTolerationSeconds sets how long the DefaultTolerationSeconds
// admission plugin lets new pods tolerate the not-ready and unreachable
// NoExecute taints (kube-apiserver's --default-not-ready-toleration-seconds
// and --default-unreachable-toleration-seconds; 300 s each by default).
// New refuses a negative value (ErrNegativeTolerationSeconds).
func WithDefaultTolerationSeconds(ts admission.TolerationSeconds) Option {
	return func(s *Server) { s.tolerations = ts }
}

// New makes an API server over st, authenticating with tokens.
func New(st *store.Store, tokens *authn.Tokens, opts ...Option) (*Server, error) {
	psa, err := admission.NewPodSecurity()
	if err != nil {
		return nil, fmt.Errorf("setting up PodSecurity admission: %w", err)
	}
	s := &Server{store: st, tokens: tokens, psa: psa, now: time.Now, nsCache: map[string]*corev1.Namespace{},
		nodeAuthz: nodeauthorizer.New(rbac.NodeRules()), tolerations: admission.DefaultTolerations()}
	for _, o := range opts {
		o(s)
	}
	if err := s.tolerations.Validate(); err != nil {
		return nil, fmt.Errorf("configuring DefaultTolerationSeconds admission: %w", err)
	}
	return s, nil
}

// Open opens the API server of a state directory: its store
// (<state>/etcd/store.db) and its token file (<state>/auth/tokens.csv),
// both made by Init.
func Open(stateDir string, opts ...Option) (*Server, error) {
	return OpenWith(stateDir, nil, opts...)
}

// OpenWith is Open with options for the store, such as a notice printed
// while another process holds the store's lock.
func OpenWith(stateDir string, storeOpts []store.Option, opts ...Option) (*Server, error) {
	tokens, err := authn.Load(authn.Path(stateDir))
	if err != nil {
		return nil, err
	}
	st, err := store.Open(store.Path(stateDir), storeOpts...)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	s, err := New(st, tokens, opts...)
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

// storagePlugin names the store in the narration of the storage phase.
func (s *Server) storagePlugin() string {
	if s.store.Backend() == store.BackendEtcd {
		return "etcd"
	}
	return "etcd (bbolt)"
}

// OpenEtcd opens the API server of a state directory with its store in
// etcd (kube-apiserver's --etcd-servers): the users of the state
// directory's token file (made by Init), and the objects in etcd, where it
// writes the bootstrap objects that are missing (the namespaces, the RBAC
// policy), as kube-apiserver does at every start. A store in etcd holds the
// same keys and values as the bbolt file: a real kube-apiserver with the
// same --etcd-prefix reads them. It fails with store.ErrUnavailable when
// etcd does not answer.
func OpenEtcd(ctx context.Context, stateDir string, cfg store.EtcdConfig, storeOpts []store.Option, opts ...Option) (*Server, error) {
	tokens, err := authn.Load(authn.Path(stateDir))
	if err != nil {
		return nil, err
	}
	st, err := store.OpenEtcd(ctx, cfg, storeOpts...)
	if err != nil {
		return nil, err
	}
	s, err := New(st, tokens, opts...)
	if err != nil {
		st.Close()
		return nil, err
	}
	if _, _, err := s.Bootstrap(ctx); err != nil {
		st.Close()
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	s.pw, s.stop = &policyWatch{}, stop
	go s.watchPolicy(wctx)
	return s, nil
}

// RunCompactor compacts the store's history every interval when it is
// kept in etcd, as kube-apiserver does (see store.Store.RunCompactor).
func (s *Server) RunCompactor(ctx context.Context, interval time.Duration, report func(rev int64, err error)) {
	s.store.RunCompactor(ctx, interval, report)
}

// Close closes the store.
func (s *Server) Close() error {
	if s.stop != nil {
		s.stop()
	}
	return s.store.Close()
}

// Tokens is the token file the server authenticates with.
func (s *Server) Tokens() *authn.Tokens { return s.tokens }

// Client returns a client that sends token with every request, as kubectl
// sends the bearer token of its kubeconfig. The token is checked on every
// request, not here: an unknown token fails each call with 401.
func (s *Server) Client(token string, opts ...ClientOption) *Client {
	c := &Client{s: s, token: token}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ClientFor returns a client for a user an authenticator in front of the
// gate already proved: the REST server authenticates each HTTP request
// (a client certificate, a bearer token) and hands the gate its user. via
// names the authenticator ("x509", "token file"), for the narration of the
// authentication phase; it is not checked again.
func (s *Server) ClientFor(u authn.User, via string, opts ...ClientOption) *Client {
	c := &Client{s: s, user: &u, via: via}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ClientAs returns a client for the user called name, with that user's
// token from the token file: what `--as NAME` does in podlab. (kubectl's
// --as is impersonation, which needs the "impersonate" verb; podlab keeps
// every user's token, so it simply uses it.)
func (s *Server) ClientAs(name string, opts ...ClientOption) (*Client, error) {
	tok, err := s.tokens.TokenFor(name)
	if err != nil {
		return nil, err
	}
	return s.Client(tok, opts...), nil
}

// ctxErr returns ctx's error, if it is done.
func ctxErr(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
		return nil
	}
}
