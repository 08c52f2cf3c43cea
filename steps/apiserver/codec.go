package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StorageMagic starts every value podlab writes to the store, as it starts
// every value kube-apiserver writes to etcd: "k8s" and a zero byte. After it
// comes a protobuf runtime.Unknown, whose typeMeta names the object's
// apiVersion and kind and whose raw field holds the object itself, in
// protobuf. Protobuf has no field names, so a stored pod is about half the
// size of its JSON, and the store writes fewer pages for it.
const StorageMagic = "k8s\x00"

// protoObject is what the generated code of k8s.io/api gives every type.
type protoObject interface {
	Object
	Size() int
	MarshalTo([]byte) (int, error)
	Unmarshal([]byte) error
}

// encode serializes an object of resource r for the store, as
// kube-apiserver's storage does: StorageMagic, then a runtime.Unknown
// wrapping the object's protobuf. Like kube-apiserver, podlab does not store
// the resourceVersion inside the value: it is the key's mod_revision, set on
// every read (decode).
func encode(r Resource, obj Object) ([]byte, error) {
	p, ok := obj.(protoObject)
	if !ok {
		return nil, fmt.Errorf("encoding %s %q: %T has no protobuf encoding", r.Kind, obj.GetName(), obj)
	}
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	defer obj.SetResourceVersion(rv)
	raw := make([]byte, p.Size())
	n, err := p.MarshalTo(raw)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", r.Kind, obj.GetName(), err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: r.GroupVersion().String(), Kind: r.Kind}, Raw: raw[:n]}
	data := make([]byte, len(StorageMagic)+u.Size())
	copy(data, StorageMagic)
	if _, err := u.MarshalTo(data[len(StorageMagic):]); err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", r.Kind, obj.GetName(), err)
	}
	return data, nil
}

// decode turns stored bytes into an object of r's kind, with its
// resourceVersion set to the revision that last wrote it. It reads the
// protobuf that encode writes, and the JSON that podlab stored before it
// wrote protobuf, so older state directories keep working.
func decode(r Resource, data []byte, modRevision int64) (Object, error) {
	obj := r.New()
	if err := unmarshal(r, data, obj); err != nil {
		return nil, fmt.Errorf("decoding a stored %s: %w (the store holds bytes podlab cannot read: see `podlab store get`)", r.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
	obj.SetResourceVersion(strconv.FormatInt(modRevision, 10))
	return obj, nil
}

func unmarshal(r Resource, data []byte, obj Object) error {
	raw, gvk, err := unwrap(data)
	if err != nil {
		return err
	}
	if gvk.Empty() { // JSON
		return json.Unmarshal(data, obj)
	}
	if gvk.Kind != r.Kind || gvk.GroupVersion() != r.GroupVersion() {
		return fmt.Errorf("the value holds a %s %s, not a %s", gvk.GroupVersion(), gvk.Kind, r.Kind)
	}
	return obj.(protoObject).Unmarshal(raw)
}

// unwrap returns the object's protobuf and its apiVersion and kind from a
// stored value, or an empty kind for a JSON value.
func unwrap(data []byte) ([]byte, schema.GroupVersionKind, error) {
	if !bytes.HasPrefix(data, []byte(StorageMagic)) {
		if len(data) > 0 && data[0] == '{' {
			return data, schema.GroupVersionKind{}, nil
		}
		return nil, schema.GroupVersionKind{}, fmt.Errorf("the value starts with neither %q (protobuf) nor '{' (JSON)", StorageMagic)
	}
	var u runtime.Unknown
	if err := u.Unmarshal(data[len(StorageMagic):]); err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("reading the runtime.Unknown after %q: %w", StorageMagic, err)
	}
	gv, err := schema.ParseGroupVersion(u.APIVersion)
	if err != nil || u.Kind == "" {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("the runtime.Unknown names apiVersion %q and kind %q", u.APIVersion, u.Kind)
	}
	return u.Raw, gv.WithKind(u.Kind), nil
}

// DecodeStored decodes a value as the store holds it, whatever its kind, for
// `podlab store get`: the object, and how it was stored ("protobuf" or
// "json").
func DecodeStored(data []byte) (Object, string, error) {
	_, gvk, err := unwrap(data)
	if err != nil {
		return nil, "", err
	}
	encoding := "protobuf"
	if gvk.Empty() {
		encoding = "json"
		var tm metav1.TypeMeta
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, "", err
		}
		gvk = tm.GroupVersionKind()
	}
	r, err := ResourceForKind(gvk)
	if err != nil {
		return nil, "", err
	}
	obj := r.New()
	if err := unmarshal(r, data, obj); err != nil {
		return nil, "", err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, encoding, nil
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
