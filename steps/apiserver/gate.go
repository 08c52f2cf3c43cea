package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The phases of a request, in the order kube-apiserver runs them.
//
// Defaulting is not admission: kube-apiserver fills in the API's defaults
// (restartPolicy, dnsPolicy, imagePullPolicy...) while it decodes the
// request body, before any admission plugin sees the object. Mutating
// admission is plugins (NamespaceLifecycle, ServiceAccount,
// DefaultTolerationSeconds, LimitRanger, Priority, RuntimeClass) and the
// mutating admission webhooks; validating admission is plugins (PodSecurity,
// ResourceQuota...) and the validating admission webhooks. Between the two,
// the registry's strategy prepares the object (PrepareForCreate drops the
// status a client sent) and validates its fields.
const (
	PhaseAuthentication      = "authentication"
	PhaseAuthorization       = "authorization"
	PhaseDefaulting          = "defaulting"
	PhaseStrategy            = "registry strategy"
	PhaseMutatingAdmission   = "mutating admission"
	PhaseValidation          = "validation"
	PhaseValidatingAdmission = "validating admission"
	PhaseStorage             = "storage"
)

// Phase is what one phase of the gate decided for one request.
type Phase struct {
	Name    string   // one of the Phase* constants
	Plugin  string   // the admission plugin, or the authenticator/authorizer
	Summary string   // one line: what it decided
	Details []string // what it looked at or changed, for -v
	Err     error    // set when this phase rejected the request
}

// Line is the phase as podlab prints it, one line: its name in a column
// of 21, then the plugin and what it decided:
//
//	authorization         RBAC: allowed by ClusterRoleBinding "cluster-admin" ...
func (p Phase) Line() string {
	what := p.Summary
	if p.Plugin != "" {
		what = p.Plugin + ": " + what
	}
	return fmt.Sprintf("%-21s %s", p.Name, what)
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithPhases calls fn with each phase of every request the client makes, as
// it happens: `podlab run -v` prints them.
func WithPhases(fn func(Phase)) ClientOption {
	return func(c *Client) { c.phases = fn }
}

// Client is one user's connection to the API server. It implements
// Interface.
type Client struct {
	s      *Server
	token  string
	phases func(Phase)
	// user is set for a client made by ClientFor: a user some authenticator
	// in front of the gate (the REST server's) already proved; via names
	// that authenticator, and impersonator the user who acts as user.
	user         *authn.User
	via          string
	impersonator *authn.User
	// bootstrap marks the API server's own start-up writes, which create
	// the RBAC policy itself and so skip its escalation check.
	bootstrap bool
	// fieldManager names the manager of this client's writes in
	// managedFields (see WithFieldManager).
	fieldManager string
	// ctx is the context of the request this client copy serves (see
	// forRequest): admission webhooks are called with it. calls holds
	// what they answered, by what they were given (see write); at is the
	// request's time; plog says each phase once.
	ctx   context.Context
	calls map[string]webhookAnswer
	at    time.Time
	plog  *phaseLog
}

var _ Interface = (*Client)(nil)

func (c *Client) report(p Phase) {
	if c.phases != nil {
		c.phases(p)
	}
}

// reportStored reports a storage phase of a write once the write is
// durable (fsync'd), not when it is made inside the transaction: a process
// killed between the two must not have said "stored at revision N" of an
// object the store does not have. Nothing is reported for a write that
// fails.
//
// phase gets the revision the write was committed at: known only at the
// commit with etcd (see store.Tx.OnCommit).
func (c *Client) reportStored(tx *store.Tx, phase func(rev int64) Phase) {
	if c.phases != nil {
		var rev int64
		tx.OnCommit(func(r int64) { rev = r })
		tx.OnDurable(func() { c.report(phase(rev)) })
	}
}

// setRV sets obj's resourceVersion to the revision its write gets: the one
// the transaction predicts now, and the one the store committed at once it
// has (etcd may commit later than predicted, another client having written
// meanwhile).
func setRV(tx *store.Tx, obj Object, predicted int64) {
	obj.SetResourceVersion(strconv.FormatInt(predicted, 10))
	tx.OnCommit(func(rev int64) { obj.SetResourceVersion(strconv.FormatInt(rev, 10)) })
}

// authenticate is the first gate: who is this? An unknown token is 401
// Unauthorized, before anything else is looked at.
func (c *Client) authenticate() (authn.User, error) {
	if c.user != nil {
		if c.phases != nil {
			c.report(c.authenticatedPhase())
		}
		return *c.user, nil
	}
	u, ok := c.s.tokens.Authenticate(c.token)
	if !ok {
		// kube-apiserver says only "Unauthorized"; podlab adds where tokens are
		err := apierrors.NewUnauthorized("Unauthorized: the bearer token is not in the token file " + c.s.tokens.Path() + "; act as a user with --as NAME, or pass one of its tokens")
		if c.phases != nil {
			c.report(Phase{Name: PhaseAuthentication, Plugin: "token file", Summary: "401 Unauthorized: the bearer token is in no line of " + c.s.tokens.Path(), Err: err})
		}
		return authn.User{}, err
	}
	if c.phases != nil {
		c.report(Phase{Name: PhaseAuthentication, Plugin: "token file",
			Summary: fmt.Sprintf("bearer token -> user %q (groups %s)", u.Name, strings.Join(u.Groups, ", ")),
			Details: []string{"the static token file " + c.s.tokens.Path() + " (kube-apiserver --token-auth-file)"}})
	}
	return u, nil
}

// authorize is the second gate: may this user do this? kube-apiserver
// runs with --authorization-mode=Node,RBAC: the Node authorizer first
// (kubelets, and only for their own node's objects), then RBAC, which reads
// the Roles and bindings from the store in the request's own transaction.
// The first to allow wins; when none does, the 403 carries the reasons the
// authorizers gave.
func (c *Client) authorize(tx *store.Tx, a rbac.Attributes) (*rbac.Policy, error) {
	p, d, err := c.s.decide(tx, a)
	if err != nil {
		return nil, err
	}
	if !d.allowed() {
		gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
		if a.Subresource != "" {
			gr.Resource += "/" + a.Subresource
		}
		// NewForbidden's text is kube-apiserver's: pods "web" is forbidden:
		// User "viewer" cannot create resource "pods" in API group "" in the
		// namespace "default", then the authorizers' reasons, if any
		msg := rbac.ForbiddenMessage(a)
		if d.node.Reason != "" {
			msg += ": " + d.node.Reason
		}
		err := apierrors.NewForbidden(gr, a.Name, errors.New(msg))
		if c.phases != nil {
			details := []string{d.rbac.Reason}
			if d.node.Reason != "" {
				details = append([]string{"Node: " + d.node.Reason}, details...)
			}
			c.report(Phase{Name: PhaseAuthorization, Plugin: d.by(), Summary: "403 Forbidden: " + msg, Details: details, Err: err})
		}
		return nil, err
	}
	if c.phases != nil {
		summary := strings.TrimPrefix(d.rbac.Reason, "RBAC: ")
		if d.node.Allowed {
			summary = d.nodeSummary
		}
		c.report(Phase{Name: PhaseAuthorization, Plugin: d.by(), Summary: summary})
	}
	return p, nil
}

// decision is what the chain of authorizers decided about one request.
type decision struct {
	// isNode: the user is a node, so the Node authorizer was asked.
	isNode bool
	node   rbac.Decision
	// nodeSummary says, for -v, what the Node authorizer allowed.
	nodeSummary string
	// rbac is RBAC's decision, when the Node authorizer did not allow.
	rbac rbac.Decision
}

func (d decision) allowed() bool { return d.node.Allowed || d.rbac.Allowed }

// by names the authorizer that decided: the one that allowed, or, for a
// refusal of a node, the Node authorizer whose reason the 403 gives.
func (d decision) by() string {
	switch {
	case d.node.Allowed:
		return "Node"
	case d.rbac.Allowed:
		return "RBAC"
	case d.isNode:
		return "Node,RBAC"
	default:
		return "RBAC"
	}
}

// decide runs the authorizers in kube-apiserver's order, Node then RBAC,
// and returns the RBAC policy it read (for the escalation check) with the
// decision.
func (s *Server) decide(tx *store.Tx, a rbac.Attributes) (*rbac.Policy, decision, error) {
	var d decision
	var nodeName string
	nodeName, d.isNode = authn.NodeIdentity(a.User)
	if d.isNode {
		var err error
		if d.node, err = s.nodeAuthz.Authorize(txPods{tx}, a); err != nil {
			return nil, d, err
		}
		if d.node.Allowed {
			d.nodeSummary = fmt.Sprintf("node %q may %s", nodeName, nodeOperation(a))
		}
	}
	p, err := s.policyIn(tx)
	if err != nil {
		return nil, d, err
	}
	if !d.node.Allowed {
		d.rbac = rbac.Authorize(p, a)
	}
	return p, d, nil
}

// nodeOperation says what the Node authorizer allowed: get pods "web" in
// namespace "default".
func nodeOperation(a rbac.Attributes) string {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	what := a.Verb + " " + res
	if a.Name != "" {
		what += fmt.Sprintf(" %q", a.Name)
	}
	if a.Namespace != "" {
		what += fmt.Sprintf(" in namespace %q", a.Namespace)
	}
	if len(a.FieldSelector) > 0 {
		terms := make([]string, len(a.FieldSelector))
		for i, r := range a.FieldSelector {
			terms[i] = r.Field + string(r.Operator) + r.Value
		}
		what += " with field selector " + strings.Join(terms, ",")
	}
	return what
}

// txPods is the Node authorizer's view of the pods: the store, read in the
// request's own transaction (kube-apiserver keeps a graph fed by
// informers instead).
type txPods struct{ tx *store.Tx }

func (p txPods) Get(namespace, name string) (*corev1.Pod, error) {
	return getTyped[*corev1.Pod](p.tx, mustResource("pods"), namespace, name)
}

func (p txPods) List(namespace string) ([]*corev1.Pod, error) {
	return listTyped[*corev1.Pod](p.tx, mustResource("pods"), namespace)
}

// policyFingerprint identifies the stored RBAC objects: how many there are
// and the latest revision that wrote one of them. Any create, update or
// delete of one changes it.
type policyFingerprint struct {
	count  int
	maxRev int64
}

var rbacResources = []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"}

// policyIn returns the RBAC policy as stored, decoding it again only when
// an RBAC object changed since the last time.
//
// Taking the fingerprint reads every RBAC key's index entry, a few
// microseconds on each request. It is skipped when the store is still at
// policyRev, a revision at which the cached policy is known current: the
// revision of the last fingerprint, moved on by update each time this
// server's own write changed no RBAC key. Any other process's write moves
// the store past policyRev, and the fingerprint is taken again.
func (s *Server) policyIn(tx *store.Tx) (*rbac.Policy, error) {
	// On etcd, a watch keeps the cached policy current (policywatch.go).
	// Otherwise learning the revision costs a round trip there, as much as
	// the fingerprint does: take the fingerprint.
	var gen int64
	watched := s.pw != nil && s.pw.ok.Load()
	if watched {
		gen = s.pw.gen.Load()
		s.mu.Lock()
		if s.policy != nil && s.policyGen == gen && len(tx.Written()) == 0 {
			p := s.policy
			s.mu.Unlock()
			return p, nil
		}
		s.mu.Unlock()
	}
	if s.store.Backend() != store.BackendEtcd {
		s.mu.Lock()
		if s.policy != nil && s.policyRev == tx.Revision() && len(tx.Written()) == 0 {
			p := s.policy
			s.mu.Unlock()
			return p, nil
		}
		s.mu.Unlock()
	}
	var fp policyFingerprint
	var prefixes []string
	for _, name := range rbacResources {
		r, _ := LookupResource(name)
		prefixes = append(prefixes, r.Prefix(""))
	}
	var err error
	fp.count, fp.maxRev, err = tx.StatAll(prefixes...)
	if err != nil {
		return nil, fmt.Errorf("reading the RBAC policy: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A revision is only known current before this transaction writes: its
	// own writes may yet be rolled back.
	current := int64(0)
	if len(tx.Written()) == 0 {
		current = tx.Revision()
	}
	if !watched || len(tx.Written()) != 0 {
		gen = -1 // not known current at any generation
	}
	if s.policy != nil && s.policyKey == fp {
		s.policyRev, s.policyGen = current, gen
		return s.policy, nil
	}
	p := &rbac.Policy{}
	for _, name := range rbacResources {
		r, _ := LookupResource(name)
		if err := tx.ForEach(r.Prefix(""), func(kv store.KV) error {
			obj, err := decode(r, kv.Value, kv.ModRevision)
			if err != nil {
				return err
			}
			addToPolicy(p, obj)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("reading the RBAC policy: %w", err)
		}
	}
	s.policy, s.policyKey, s.policyRev, s.policyGen = p, fp, current, gen
	return p, nil
}

// update runs fn in one write transaction of the store, as every write of
// the API server does, and keeps policyRev: when the write started at
// policyRev and changed no RBAC key, the cached policy is still current at
// the new revision.
func (s *Server) update(ctx context.Context, fn func(tx *store.Tx) error) error {
	var start int64
	var rbacWritten bool
	rev, err := s.store.Update(ctx, func(tx *store.Tx) error {
		if s.store.Backend() != store.BackendEtcd { // there a round trip, for a cache policyIn skips
			start = tx.Revision()
		}
		if err := fn(tx); err != nil {
			return err
		}
		rbacWritten = writesPolicy(tx.Written())
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	switch {
	case rbacWritten:
		s.policyRev = 0
		if s.pw != nil { // before the watch tells: this server's own writes count at once
			s.pw.gen.Add(1)
		}
	case s.policyRev == start && s.policyRev != 0:
		s.policyRev = rev
	}
	s.mu.Unlock()
	return nil
}

// writesPolicy says whether one of keys is an RBAC object's.
func writesPolicy(keys []string) bool {
	for _, k := range keys {
		for _, name := range rbacResources {
			r, _ := LookupResource(name)
			if strings.HasPrefix(k, r.Prefix("")) {
				return true
			}
		}
	}
	return false
}

func addToPolicy(p *rbac.Policy, obj Object) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		p.Roles = append(p.Roles, *o)
	case *rbacv1.ClusterRole:
		p.ClusterRoles = append(p.ClusterRoles, *o)
	case *rbacv1.RoleBinding:
		p.RoleBindings = append(p.RoleBindings, *o)
	case *rbacv1.ClusterRoleBinding:
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, *o)
	}
}

// authenticatedPhase narrates the authentication of a client made by
// ClientFor: which authenticator proved the user, and who impersonates it.
func (c *Client) authenticatedPhase() Phase {
	u := *c.user
	p := Phase{Name: PhaseAuthentication, Plugin: c.via,
		Summary: fmt.Sprintf("%s -> user %q (groups %s)", c.via, u.Name, strings.Join(u.Groups, ", "))}
	if c.impersonator != nil {
		p.Summary = fmt.Sprintf("%s impersonating %s (groups %s)", c.impersonator.Name, u.Name, strings.Join(u.Groups, ", "))
		p.Details = []string{fmt.Sprintf("%s proved user %q; the Impersonate-* headers name %q, and RBAC lets %q impersonate", c.via, c.impersonator.Name, u.Name, c.impersonator.Name)}
	}
	return p
}
