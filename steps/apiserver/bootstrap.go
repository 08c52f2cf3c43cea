package apiserver

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// HostNode is the name of the node this machine plays. Nodes added with
// `podlab node add` are extra nodes on the same machine.
const HostNode = "node-1"

// InitResult is what Init made.
type InitResult struct {
	StorePath string
	TokenPath string
	Users     []authn.Entry
	// Created lists the store keys Init wrote: namespaces and the RBAC
	// bootstrap policy.
	Created  []string
	Revision int64
	// Existing is true when the state directory was initialized before:
	// the tokens and objects found there were kept.
	Existing bool
}

// Init makes a state directory's control plane: a token file with podlab's
// users (an admin in system:masters, a developer, a read-only viewer, the
// scheduler, the controller-manager and the kubelet of HostNode), and a
// store holding the namespaces and the RBAC policy kube-apiserver creates
// when it starts. Run again, it keeps what exists and adds what is missing.
func Init(ctx context.Context, stateDir string, storeOpts ...store.Option) (*InitResult, error) {
	res := &InitResult{StorePath: store.Path(stateDir), TokenPath: authn.Path(stateDir)}
	if fileExists(res.TokenPath) {
		res.Existing = true
	} else {
		entries, err := defaultUsers()
		if err != nil {
			return nil, err
		}
		if err := authn.WriteFile(res.TokenPath, entries); err != nil {
			return nil, err
		}
	}
	tokens, err := authn.Load(res.TokenPath)
	if err != nil {
		return nil, err
	}
	res.Users = tokens.Entries()
	st, err := store.Open(res.StorePath, storeOpts...)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	defer st.Close()
	s, err := New(st, tokens)
	if err != nil {
		return nil, err
	}
	res.Created, res.Revision, err = s.Bootstrap(ctx)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Bootstrap writes the objects kube-apiserver makes when it starts, those
// missing from the store: the namespaces and the RBAC bootstrap policy
// (see bootstrap). It returns the keys it wrote and the revision after.
func (s *Server) Bootstrap(ctx context.Context) ([]string, int64, error) {
	var created []string
	rev, err := s.store.Update(ctx, func(tx *store.Tx) error {
		var err error
		created, err = s.bootstrap(tx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("writing the bootstrap objects: %w", err)
	}
	return created, rev, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// defaultUsers are the identities of the lab, each with a new token.
func defaultUsers() ([]authn.Entry, error) {
	users := []authn.User{
		{Name: "admin", UID: "uid-admin", Groups: []string{authn.GroupMasters}},
		{Name: "developer", UID: "uid-developer", Groups: []string{"developers"}},
		{Name: "viewer", UID: "uid-viewer", Groups: []string{"viewers"}},
		{Name: "system:kube-scheduler", UID: "uid-kube-scheduler"},
		{Name: "system:kube-controller-manager", UID: "uid-kube-controller-manager"},
		NodeUser(HostNode),
	}
	entries := make([]authn.Entry, len(users))
	for i, u := range users {
		tok, err := authn.NewToken()
		if err != nil {
			return nil, err
		}
		entries[i] = authn.Entry{Token: tok, User: u}
	}
	return entries, nil
}

// NodeUser is the identity of a node's kubelet: system:node:NAME in the
// group system:nodes, as the kubelet's client certificate says in
// Kubernetes.
func NodeUser(node string) authn.User {
	return authn.User{Name: "system:node:" + node, UID: "uid-node-" + node, Groups: []string{authn.GroupNodes}}
}

// AddNodeUser adds a kubelet identity for node to the token file, unless it
// has one, and returns its token.
func AddNodeUser(stateDir, node string) (string, error) {
	path := authn.Path(stateDir)
	tokens, err := authn.Load(path)
	if err != nil {
		return "", err
	}
	u := NodeUser(node)
	if tok, err := tokens.TokenFor(u.Name); err == nil {
		return tok, nil
	}
	tok, err := authn.NewToken()
	if err != nil {
		return "", err
	}
	if err := authn.WriteFile(path, append(tokens.Entries(), authn.Entry{Token: tok, User: u})); err != nil {
		return "", err
	}
	return tok, nil
}

// bootstrap writes what kube-apiserver creates when it starts, skipping what
// exists: the namespaces default, kube-system, kube-public and
// kube-node-lease, and the default RBAC policy. kube-apiserver writes them
// with its own loopback identity, past its own gate; so does podlab, but
// they get the same defaults and validation as everything else.
func (s *Server) bootstrap(tx *store.Tx) ([]string, error) {
	var objs []Object
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	crs, crbs, rbs := rbac.Bootstrap()
	for i := range crs {
		objs = append(objs, &crs[i])
	}
	for i := range crbs {
		objs = append(objs, &crbs[i])
	}
	for i := range rbs {
		objs = append(objs, &rbs[i])
	}
	loopback := authn.User{Name: "system:apiserver", Groups: []string{authn.GroupMasters}}
	var created []string
	for _, obj := range objs {
		res, err := ResourceOf(obj)
		if err != nil {
			return nil, err
		}
		key := res.Key(obj.GetNamespace(), obj.GetName())
		if _, ok, err := tx.Get(key); err != nil || ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		if _, err := s.create(tx, nil, loopback, res, obj, false); err != nil {
			return nil, fmt.Errorf("creating %s: %w", key, err)
		}
		created = append(created, key)
	}
	return created, nil
}
