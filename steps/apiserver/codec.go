package apiserver

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// encode serializes an object for the store. Like kube-apiserver, podlab
// does not store the resourceVersion inside the value: it is the key's
// mod_revision, set on every read (decode). Unlike kube-apiserver, which
// stores protobuf with a "k8s\x00" prefix, podlab stores JSON, so that
// `podlab store get` shows something a learner can read.
func encode(obj Object) ([]byte, error) {
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	data, err := json.Marshal(obj)
	obj.SetResourceVersion(rv)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return data, nil
}

// decode turns stored bytes into an object of r's kind, with its
// resourceVersion set to the revision that last wrote it.
func decode(r Resource, data []byte, modRevision int64) (Object, error) {
	obj := r.New()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decoding a stored %s: %w (the store holds bytes podlab cannot read: see `podlab store get`)", r.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
	obj.SetResourceVersion(strconv.FormatInt(modRevision, 10))
	return obj, nil
}

// parseRV parses a resourceVersion; "" is 0.
func parseRV(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("resourceVersion %q is not a revision: it must be a number the server gave out", rv)
	}
	return n, nil
}
