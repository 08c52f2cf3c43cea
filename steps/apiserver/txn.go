package apiserver

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/store"
)

// getTyped reads one object inside a transaction; a missing object is
// (nil, nil).
func getTyped[T Object](tx *store.Tx, r Resource, namespace, name string) (T, error) {
	var zero T
	kv, ok, err := tx.Get(r.Key(namespace, name))
	if err != nil || !ok {
		return zero, err
	}
	obj, err := decode(r, kv.Value, kv.ModRevision)
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s holds a %T, not a %s", kv.Key, obj, r.Kind)
	}
	return t, nil
}

// listTyped reads every object of r in namespace inside a transaction.
func listTyped[T Object](tx *store.Tx, r Resource, namespace string) ([]T, error) {
	var out []T
	err := tx.ForEach(r.Prefix(namespace), func(kv store.KV) error {
		obj, err := decode(r, kv.Value, kv.ModRevision)
		if err != nil {
			return err
		}
		t, ok := obj.(T)
		if !ok {
			return fmt.Errorf("%s holds a %T, not a %s", kv.Key, obj, r.Kind)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// put writes obj back over its stored version, which must still be the
// one at obj's resourceVersion.
func put(tx *store.Tx, r Resource, obj Object) (store.KV, error) {
	rv, err := parseRV(obj.GetResourceVersion())
	if err != nil {
		return store.KV{}, apierrors.NewBadRequest(err.Error())
	}
	data, err := encode(r, obj)
	if err != nil {
		return store.KV{}, err
	}
	kv, err := tx.Put(r.Key(obj.GetNamespace(), obj.GetName()), data, rv)
	if err != nil {
		return kv, storeError(r.GroupResource(), obj.GetName(), err)
	}
	return kv, nil
}

// storeError turns the store's sentinel errors into the status errors
// kube-apiserver returns for them.
func storeError(gr schema.GroupResource, name string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired("too old resource version: " + err.Error())
	}
	return err
}

// forbidden is a 403 for a reason other than RBAC's decision (an admission
// plugin, the escalation check).
func forbidden(gr schema.GroupResource, name string, err error) error {
	return apierrors.NewForbidden(gr, name, err)
}

// namespace reads a namespace inside tx; a missing one is nil. The result
// is shared: read it, never change it.
func (s *Server) namespace(tx *store.Tx, name string) (*corev1.Namespace, error) {
	r := mustResource("namespaces")
	kv, ok, err := tx.Get(r.Key("", name))
	if err != nil || !ok {
		return nil, err
	}
	rv := strconv.FormatInt(kv.ModRevision, 10)
	s.nsMu.Lock()
	cached := s.nsCache[name]
	s.nsMu.Unlock()
	if cached != nil && cached.ResourceVersion == rv {
		return cached, nil
	}
	obj, err := decode(r, kv.Value, kv.ModRevision)
	if err != nil {
		return nil, err
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not a Namespace", kv.Key, obj)
	}
	s.nsMu.Lock()
	s.nsCache[name] = ns
	s.nsMu.Unlock()
	return ns, nil
}
