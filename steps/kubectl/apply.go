package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kjson "sigs.k8s.io/json"

	"github.com/podlab/podlab/steps/apiserver"
)

// LastAppliedAnnotation is where kubectl apply records the manifest it
// applied: the "original" of the next apply's three-way merge.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// What Apply did, in kubectl's words.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
)

// Applied is what Apply did with one object.
type Applied struct {
	// Action is Created, Configured or Unchanged.
	Action string
	// Resource is the object's resource (deployments.apps).
	Resource apiserver.Resource
	// Object is the object as stored afterwards (for Unchanged, as read).
	Object apiserver.Object
	// LiveVersion is the resourceVersion the object had when Apply read it
	// ("" when it was created).
	LiveVersion string
	// Patch is the strategic merge patch sent, for Configured.
	Patch []byte
}

// Apply is kubectl apply's client side (k8s.io/kubectl pkg/cmd/apply): it
// reads the live object and, when there is none, creates the manifest's.
// Otherwise it computes a three-way strategic merge patch from
//
//   - the original: the manifest applied last time, from the live object's
//     last-applied annotation;
//   - the modified: this manifest, with that annotation set to it;
//   - the current: the live object,
//
// and sends it with Patch. A field the manifest sets is set; a field the
// last manifest set and this one does not is removed; a field no manifest
// ever set (spec.replicas after a `kubectl scale`, a label another tool
// added, defaults) is left as it is. Lists merge as the type's
// patchStrategy says: containers by name, so one container of a manifest
// changes without touching another someone else added.
//
// A metadata.resourceVersion in the manifest (`get -o yaml`, edit, apply)
// goes into the patch as a precondition: the API server answers 409
// Conflict if the object changed since it was read, and nothing is lost.
// kubectl retries a conflicting patch 5 times from a fresh read; podlab's
// API server patches in the transaction that reads, so a patch without a
// resourceVersion never conflicts and one with it would conflict on every
// retry: Apply sends once.
//
// namespace is used when the manifest names none (kubectl's -n).
func Apply(ctx context.Context, c apiserver.Interface, m Manifest, namespace string) (Applied, error) {
	gvk := m.Object.GetObjectKind().GroupVersionKind()
	res, err := apiserver.ResourceForKind(gvk)
	if err != nil {
		return Applied{}, err
	}
	a := Applied{Resource: res}
	name := m.Object.GetName()
	if name == "" {
		return a, fmt.Errorf("applying a %s: metadata.name is required: apply names the object it creates or updates", gvk.Kind)
	}
	doc := map[string]any{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(m.JSON, &doc); err != nil {
		return a, fmt.Errorf("reading the manifest of %s %q: %w", gvk.Kind, name, err)
	}
	ns := ""
	if res.Namespaced {
		ns = m.Object.GetNamespace()
		if ns == "" {
			ns = namespace
			if ns == "" {
				ns = apiserver.DefaultNamespace
			}
			metadataOf(doc)["namespace"] = ns
		}
	}
	modified, err := ModifiedConfiguration(doc)
	if err != nil {
		return a, fmt.Errorf("encoding the manifest of %s %q: %w", gvk.Kind, name, err)
	}

	live, err := c.Get(ctx, res.Name, ns, name)
	if apierrors.IsNotFound(err) {
		obj := res.New()
		if err := json.Unmarshal(modified, obj); err != nil {
			return a, fmt.Errorf("decoding the manifest of %s %q: %w", gvk.Kind, name, err)
		}
		if a.Object, err = c.Create(ctx, obj); err != nil {
			return a, err
		}
		a.Action = Created
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.LiveVersion = live.GetResourceVersion()
	current, err := json.Marshal(live)
	if err != nil {
		return a, err
	}
	original := []byte(live.GetAnnotations()[LastAppliedAnnotation])
	lookup, err := strategicpatch.NewPatchMetaFromStruct(res.New())
	if err != nil {
		return a, err
	}
	// overwrite: the manifest wins over changes made since the last apply
	// to fields it sets, as kubectl apply's default --overwrite=true
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, lookup, true)
	if err != nil {
		return a, fmt.Errorf("computing the patch of %s %q from the last-applied configuration, the manifest and the live object: %w", gvk.Kind, name, err)
	}
	if string(patch) == "{}" {
		a.Action, a.Object = Unchanged, live
		return a, nil
	}
	if rv := m.Object.GetResourceVersion(); rv != "" {
		if patch, err = withResourceVersion(patch, rv); err != nil {
			return a, err
		}
	}
	a.Patch = patch
	if a.Object, err = c.Patch(ctx, res.Name, ns, name, types.StrategicMergePatchType, patch, apiserver.PatchOptions{}); err != nil {
		return a, err
	}
	a.Action = Configured
	return a, nil
}

// ModifiedConfiguration is kubectl's util.GetModifiedConfiguration: the
// manifest with its last-applied annotation set to the manifest itself,
// serialized without that annotation first, so that it never nests inside
// itself (a `get -o json | apply` sends the annotation back).
func ModifiedConfiguration(doc map[string]any) ([]byte, error) {
	meta := metadataOf(doc)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	delete(ann, LastAppliedAnnotation)
	meta["annotations"] = ann
	original, err := encodeJSON(doc)
	if err != nil {
		return nil, err
	}
	ann[LastAppliedAnnotation] = string(original)
	return encodeJSON(doc)
}

// encodeJSON is the JSON kubectl writes: keys sorted, HTML not escaped,
// a newline at the end.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// metadataOf returns doc's metadata, making it if needed.
func metadataOf(doc map[string]any) map[string]any {
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	return meta
}

// withResourceVersion sets metadata.resourceVersion in a patch, as
// kubectl's addResourceVersion.
func withResourceVersion(patch []byte, rv string) ([]byte, error) {
	m := map[string]any{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(patch, &m); err != nil {
		return nil, err
	}
	metadataOf(m)["resourceVersion"] = rv
	return json.Marshal(m)
}

// ShortPatch is a patch for a person to read: the last-applied annotation's
// value, the whole manifest again, is elided.
func ShortPatch(patch []byte) string {
	m := map[string]any{}
	if kjson.UnmarshalCaseSensitivePreserveInts(patch, &m) != nil {
		return string(patch)
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		if ann, ok := meta["annotations"].(map[string]any); ok {
			if _, ok := ann[LastAppliedAnnotation]; ok {
				ann[LastAppliedAnnotation] = "…"
			}
		}
	}
	b, err := encodeJSON(m)
	if err != nil {
		return string(patch)
	}
	return string(bytes.TrimSpace(b))
}
