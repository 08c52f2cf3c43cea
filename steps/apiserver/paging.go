package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/podlab/podlab/steps/store"
)

// A list in pages, as kube-apiserver serves it. The first page (limit=N)
// is read at the store's current revision; its continue token holds that
// revision and the key the next page starts at, and every later page is
// read at that same revision (store.Tx.ForEachAt: etcd's range read "with
// revision"), so the pages together are one consistent snapshot, however
// the objects changed in between. Once compaction passes the token's
// revision, that snapshot is gone: 410 Expired, with a token that
// continues at the current revision instead, if the client accepts an
// inconsistent list.
//
// resourceVersion on a list says which state to read (kube's rules,
// k8s.io/apiserver/pkg/storage.ValidateListOptions): none, the current one;
// with resourceVersionMatch=NotOlderThan, the current one, once the store
// has reached that revision (3 s at most, then 504); with Exact (or, with
// a limit and no match, as old clients ask), the state at that very
// revision, or 410 if it was compacted.

// Texts of kube-apiserver's errors (k8s.io/apiserver/pkg/storage/etcd3/errors.go).
const (
	listExpired          = "The resourceVersion for the provided list is too old."
	inconsistentContinue = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
)

// freshWait is how long a NotOlderThan list waits for the store to reach
// its resourceVersion, as kube-apiserver's watch cache waits (3 s).
const freshWait = 3 * time.Second

// continueToken is what a continue token holds, in kube-apiserver's
// format (k8s.io/apiserver/pkg/storage/continue.go): base64 of
// {"v":"meta.k8s.io/v1","rv":12,"start":"web\u0000"}, the revision of the
// first page and the next key, relative to the list's prefix. rv -1 means
// "at the current revision".
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

// encodeContinue makes the token of the page after key, read at rev.
func encodeContinue(key, prefix string, rev int64) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rev, Start: strings.TrimPrefix(key, prefix)})
	return base64.RawURLEncoding.EncodeToString(data)
}

// decodeContinue reads a token: the key the page starts at, and its
// revision (-1: current). Its errors are kube's.
func decodeContinue(s, prefix string) (from string, rev int64, err error) {
	const invalid = "continue key is not valid"
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %v", invalid, err)
	}
	var t continueToken
	if err := json.Unmarshal(data, &t); err != nil {
		return "", 0, fmt.Errorf("%s: %v", invalid, err)
	}
	switch {
	case t.APIVersion != "meta.k8s.io/v1":
		return "", 0, fmt.Errorf("%s: server does not recognize this encoded version %v", invalid, t.APIVersion)
	case t.RV == 0:
		return "", 0, fmt.Errorf("%s: incorrect encoded start resourceVersion (version meta.k8s.io/v1)", invalid)
	case t.Start == "":
		return "", 0, fmt.Errorf("%s: encoded start key empty (version meta.k8s.io/v1)", invalid)
	}
	// path.Clean keeps a token from reaching outside the list's prefix.
	key := t.Start
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if path.Clean(key) != key {
		return "", 0, fmt.Errorf("%s: %v", invalid, t.Start)
	}
	return prefix + key[1:], t.RV, nil
}

// listRead is where a list reads: from which key, at which revision.
type listRead struct {
	from      string
	rev       int64 // 0: the current revision
	minRev    int64 // NotOlderThan: the revision the store must have reached
	continued bool  // a continue token named rev
	exact     bool  // resourceVersion named rev
}

// planList checks a list's options as kube-apiserver does, and says where
// to read.
func planList(opts ListOptions, prefix string) (listRead, error) {
	if opts.Limit < 0 {
		return listRead{}, apierrors.NewBadRequest(fmt.Sprintf("limit %d is not a number of items", opts.Limit))
	}
	lo := internalversion.ListOptions{ResourceVersion: opts.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatch(opts.ResourceVersionMatch), Limit: opts.Limit, Continue: opts.Continue}
	if errs := validation.ValidateListOptions(&lo, true); len(errs) > 0 {
		return listRead{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.Continue != "" {
		from, rev, err := decodeContinue(opts.Continue, prefix)
		if err != nil {
			return listRead{}, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return listRead{}, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		return listRead{from: from, rev: max(rev, 0), continued: rev > 0}, nil
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return listRead{}, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	switch opts.ResourceVersionMatch {
	case string(metav1.ResourceVersionMatchExact):
		return listRead{rev: rv, exact: true}, nil
	case string(metav1.ResourceVersionMatchNotOlderThan):
		return listRead{minRev: rv}, nil
	}
	if opts.Limit > 0 && rv > 0 { // kube's legacy rule: a limit and a resourceVersion read at it
		return listRead{rev: rv, exact: true}, nil
	}
	// a resourceVersion without a match is NotOlderThan: one the store has
	// not reached is a 504 (after freshWait), not the current state
	return listRead{minRev: rv}, nil
}

// at turns the store's answer for a read at a revision into kube's: 410
// for a compacted revision (with a token to go on inconsistently, for a
// continued list), 504 for one the store has not reached.
func (p listRead) storeError(err error, current int64, prefix string) error {
	switch {
	case errors.Is(err, store.ErrCompacted) && p.continued:
		se := apierrors.NewResourceExpired(inconsistentContinue)
		se.ErrStatus.ListMeta.Continue = encodeContinue(p.from, prefix, -1)
		return se
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired(listExpired)
	case errors.Is(err, store.ErrBadRevision):
		return tooLargeResourceVersion(p.rev, current)
	}
	return err
}

// tooLargeResourceVersion is kube's 504 for a revision the store has not
// reached: "Too large resource version: 9, current: 3", with the cause
// ResourceVersionTooLarge, on which client-go's reflector lists again.
func tooLargeResourceVersion(want, current int64) error {
	return k8sstorage.NewTooLargeResourceVersionError(uint64(want), uint64(max(current, 0)), 1)
}

// IsTooLargeResourceVersion says err is a 504 for a revision the store
// has not reached (tooLargeResourceVersion): the client lists again.
func IsTooLargeResourceVersion(err error) bool { return k8sstorage.IsTooLargeResourceVersion(err) }

// waitForRevision waits, at most freshWait, until the store's revision
// reaches rev: a NotOlderThan list asked for a revision this process may
// not have seen yet.
func (s *Server) waitForRevision(ctx context.Context, rev int64) error {
	current, err := s.store.Revision(ctx)
	if err != nil || current >= rev {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, freshWait)
	defer cancel()
	w, err := s.store.Watch(wctx, "/", current)
	if err != nil {
		return err
	}
	for ev := range w.Events() {
		if ev.Revision >= rev {
			return nil
		}
		current = ev.Revision
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return tooLargeResourceVersion(rev, current)
}
