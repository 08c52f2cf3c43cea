package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	admissionv1 "k8s.io/api/admission/v1"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// DefaultNamespace is where namespaced objects go when none is named, as
// kubectl's default context namespace.
const DefaultNamespace = "default"

// ResourceOf finds the resource of an object from its kind, or from its Go
// type when apiVersion and kind are not set (and then sets them).
func ResourceOf(obj Object) (Resource, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" {
		return ResourceForKind(gvk)
	}
	for _, r := range resources {
		if fmt.Sprintf("%T", r.new()) == fmt.Sprintf("%T", obj) {
			obj.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("podlab's API server does not serve %T", obj)
}

// Create implements Interface.
func (c *Client) Create(ctx context.Context, in Object) (Object, error) {
	c = c.forRequest(ctx)
	res, err := ResourceOf(in)
	if err != nil {
		return nil, err
	}
	input := in.DeepCopyObject().(Object)
	if res.Namespaced && input.GetNamespace() == "" {
		input.SetNamespace(DefaultNamespace)
	}
	if !res.Namespaced {
		input.SetNamespace("")
	}
	// The name is generated once: admission webhooks are given the same
	// object each time the write's transaction runs (see write).
	if input.GetName() == "" && input.GetGenerateName() != "" {
		input.SetName(generateName(input.GetGenerateName()))
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	// What a create records in managedFields depends on the object alone:
	// computed here, the field manager's work (a third of a create's CPU)
	// is not done while the store's lock is held.
	c.trackCreate(res, input)
	var obj Object
	err = c.write(ctx, func(tx *store.Tx) error {
		obj = input.DeepCopyObject().(Object) // admission changes it: each run starts from the input
		// A create is a POST to the collection: kube-apiserver authorizes it
		// with no name (so RBAC's resourceNames never match a create, and a
		// 403 reads "pods is forbidden").
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "create", APIGroup: res.Group, Resource: res.Name, Namespace: obj.GetNamespace()}); err != nil {
			return err
		}
		_, err := c.s.create(tx, c, u, res, obj, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	return obj, nil // its resourceVersion set at the commit (see create)
}

// create admits, validates and stores a new object inside tx. c is nil for
// the API server's own bootstrap writes, which skip admission's narration
// but not its defaults and validation.
//
// tracked says obj's managedFields are set already: by a server-side
// apply, or by Create before its transaction.
func (s *Server) create(tx *store.Tx, c *Client, u authn.User, res Resource, obj Object, tracked bool) (store.KV, error) {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj.SetName(generateName(obj.GetGenerateName()))
	}
	if c == nil {
		c = &Client{s: s, bootstrap: true}
	}
	quotas, err := c.admitCreate(tx, u, res, obj, tracked)
	if err != nil {
		return store.KV{}, err
	}
	// kube-apiserver's storage refuses a create that names a revision: the
	// object does not exist, so there is no revision to be at (a manifest
	// saved with `get -o yaml` carries the old one: remove
	// metadata.resourceVersion, or use apply). "0" means none. The answer
	// is a 500 without a reason, as kube-apiserver's etcd3 store gives it.
	if rv, err := parseRV(obj.GetResourceVersion()); err == nil && rv != 0 {
		hint := fmt.Sprintf("metadata.resourceVersion is %q, a revision of an object that does not exist (yet, or any more): remove it from the manifest to create the object anew", obj.GetResourceVersion())
		return store.KV{}, c.phase(PhaseStorage, s.storagePlugin(), []string{hint}, errResourceVersionSetOnCreate())
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(s.now()))
	obj.SetGeneration(1)
	obj.SetResourceVersion("")
	obj.SetDeletionTimestamp(nil)
	data, err := encode(res, obj)
	if err != nil {
		return store.KV{}, err
	}
	key := res.Key(obj.GetNamespace(), obj.GetName())
	kv, err := tx.Create(key, data)
	for tries := 0; errors.Is(err, store.ErrExists) && obj.GetGenerateName() != "" && tries < 8; tries++ {
		obj.SetName(generateName(obj.GetGenerateName()))
		key = res.Key(obj.GetNamespace(), obj.GetName())
		if data, err = encode(res, obj); err == nil {
			kv, err = tx.Create(key, data)
		}
	}
	if err != nil {
		return store.KV{}, storeError(res.GroupResource(), obj.GetName(), err)
	}
	for _, q := range quotas {
		if _, err := put(tx, mustResource("resourcequotas"), q); err != nil {
			return store.KV{}, fmt.Errorf("updating quota %q's usage: %w", q.Name, err)
		}
	}
	// Not before the commit: a create run again (etcd's transactions are
	// when another client wrote what this one read) must find no
	// resourceVersion on obj.
	tx.OnCommit(func(rev int64) { obj.SetResourceVersion(strconv.FormatInt(rev, 10)) })
	if c.phases != nil {
		size := len(data)
		c.reportStored(tx, func(rev int64) Phase {
			return Phase{Name: PhaseStorage, Plugin: s.storagePlugin(), Summary: fmt.Sprintf("created %s at revision %d (%d bytes of protobuf)", key, rev, size)}
		})
	}
	return kv, nil
}

// errResourceVersionSetOnCreate is kube-apiserver's answer to a create with
// metadata.resourceVersion set: storage.ErrResourceVersionSetOnCreate, an
// error without a status of its own, which its handler sends as a 500 with
// reason Unknown.
func errResourceVersionSetOnCreate() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: "resourceVersion should not be set on objects to be created",
	}}
}

// generateName appends 5 random characters to prefix, from the alphabet
// Kubernetes uses (no vowels, no look-alikes): web-7d4b9c8f6-x2kqz.
func generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return prefix + string(b)
}

// Update implements Interface.
func (c *Client) Update(ctx context.Context, obj Object) (Object, error) {
	return c.update(ctx, obj, false)
}

// UpdateStatus implements Interface.
func (c *Client) UpdateStatus(ctx context.Context, obj Object) (Object, error) {
	return c.update(ctx, obj, true)
}

func (c *Client) update(ctx context.Context, in Object, status bool) (Object, error) {
	c = c.forRequest(ctx)
	res, err := ResourceOf(in)
	if err != nil {
		return nil, err
	}
	if status && !res.HasStatus {
		return nil, apierrors.NewMethodNotSupported(res.GroupResource(), "update status")
	}
	ns := in.GetNamespace()
	if res.Namespaced && ns == "" {
		ns = DefaultNamespace
	}
	if !res.Namespaced {
		ns = ""
	}
	rv, err := parseRV(in.GetResourceVersion())
	if err != nil || rv == 0 {
		return nil, apierrors.NewInvalid(res.GroupVersion().WithKind(res.Kind).GroupKind(), in.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), in.GetResourceVersion(), "must be specified for an update: read the object first, change it, and send it back"),
		})
	}
	sub := ""
	if status {
		sub = "status"
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	var out Object
	err = c.write(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "update", APIGroup: res.Group, Resource: res.Name, Subresource: sub, Namespace: ns, Name: in.GetName()}); err != nil {
			return err
		}
		old, err := getTyped[Object](tx, res, ns, in.GetName())
		if err != nil {
			return err
		}
		if old == nil {
			return apierrors.NewNotFound(res.GroupResource(), in.GetName())
		}
		if old.GetResourceVersion() != fmt.Sprint(rv) {
			return storeError(res.GroupResource(), in.GetName(), store.ErrConflict)
		}
		out, err = c.replace(tx, u, res, old, in, status, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// replace stores in over old inside tx, after admission and validation:
// what an update and a patch share. in's resourceVersion has been checked.
// applied says in is the result of a server-side apply, whose
// managedFields the apply has set; otherwise replace records the write in
// them, as an Update by c's manager.
func (c *Client) replace(tx *store.Tx, u authn.User, res Resource, old, in Object, status, applied bool) (Object, error) {
	obj, err := merge(res, old, in, status)
	if err != nil {
		return nil, err
	}
	sub := ""
	if status {
		sub = "status"
	}
	if err := c.nodeRestriction(tx, u, admission.Update, res, sub, old.GetNamespace(), old.GetName(), obj, old); err != nil {
		return nil, err
	}
	if !status {
		// (kube-apiserver defaults the object it decodes, before admission)
		if err := c.phase(PhaseDefaulting, "defaults", defaults(obj), nil); err != nil {
			return nil, err
		}
		// kube-apiserver runs DefaultTolerationSeconds on updates too: a
		// replaced pod without the tolerations gets them back (validation
		// would refuse their removal).
		if pod, ok := obj.(*corev1.Pod); ok {
			if err := c.phase(PhaseMutatingAdmission, "DefaultTolerationSeconds", admission.DefaultTolerationSeconds(pod, c.s.tolerations), nil); err != nil {
				return nil, err
			}
		}
	}
	// Admission webhooks see spec updates (podlab does not call them for
	// the status subresource).
	var ns *corev1.Namespace
	if !status && res.Namespaced && !c.bootstrap {
		var err error
		if ns, err = c.s.namespace(tx, obj.GetNamespace()); err != nil {
			return nil, err
		}
	}
	if !status {
		if err := c.callWebhooks(tx, u, true, admissionv1.Update, res, ns, obj, old); err != nil {
			return nil, err
		}
	}
	if !applied {
		c.trackUpdate(res, sub, old, obj)
	}
	if err := c.phase(PhaseValidation, "", nil, validateUpdate(obj, old)); err != nil {
		return nil, err
	}
	if !status {
		if err := c.callWebhooks(tx, u, false, admissionv1.Update, res, ns, obj, old); err != nil {
			return nil, err
		}
	}
	if !status {
		if err := c.escalation(tx, u, obj); err != nil {
			return nil, err
		}
		if ns, ok := obj.(*corev1.Namespace); ok {
			notes, err := c.s.psa.AdmitNamespaceUpdate(ns, old.(*corev1.Namespace))
			if err := c.phase(PhaseValidatingAdmission, "PodSecurity", notes, err); err != nil {
				return nil, err
			}
		}
	}
	kv, err := put(tx, res, obj)
	if err != nil {
		return nil, err
	}
	setRV(tx, obj, kv.ModRevision)
	if c.phases != nil {
		c.reportStored(tx, func(rev int64) Phase {
			return Phase{Name: PhaseStorage, Plugin: c.s.storagePlugin(), Summary: fmt.Sprintf("updated %s at revision %d", kv.Key, rev)}
		})
	}
	return obj, nil
}

// merge computes the object an update stores. A spec update keeps the
// stored status, a status update keeps everything but the status (the
// status subresource), and neither may change what the server owns: uid,
// creationTimestamp, deletion marks. generation counts spec changes.
func merge(res Resource, old, in Object, status bool) (Object, error) {
	oldMap, err := toMap(old)
	if err != nil {
		return nil, err
	}
	inMap, err := toMap(in)
	if err != nil {
		return nil, err
	}
	outMap := inMap
	if status {
		outMap = oldMap
		outMap["status"] = inMap["status"]
	} else if res.HasStatus {
		outMap["status"] = oldMap["status"]
	}
	data, err := json.Marshal(outMap)
	if err != nil {
		return nil, err
	}
	obj := res.New()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decoding the updated %s: %w", res.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
	if p, ok := obj.(*corev1.Pod); ok && status && p.Status.QOSClass == "" {
		// the QoS class is set once, on create: a status writer that
		// leaves it out keeps it (kube's podStatusStrategy backfills it)
		p.Status.QOSClass = old.(*corev1.Pod).Status.QOSClass
	}
	obj.SetNamespace(old.GetNamespace())
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj.SetResourceVersion(old.GetResourceVersion())
	gen := old.GetGeneration()
	if !status && !bytes.Equal(mustJSON(inMap["spec"]), mustJSON(oldMap["spec"])) {
		gen++
	}
	obj.SetGeneration(gen)
	return obj, nil
}

func toMap(obj Object) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, json.Unmarshal(data, &m)
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v) // values that came out of json.Unmarshal always marshal
	return data
}

// Bind implements Interface: the pods/binding subresource. It sets the
// pod's spec.nodeName, which nothing else may change, and its PodScheduled
// condition.
func (c *Client) Bind(ctx context.Context, b *corev1.Binding) error {
	ns := b.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	pods := mustResource("pods")
	if b.Target.Name == "" || (b.Target.Kind != "" && b.Target.Kind != "Node") {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), b.Name, field.ErrorList{
			field.Required(field.NewPath("target", "name"), "a binding names the node (kind Node) the pod goes to")})
	}
	u, err := c.authenticate()
	if err != nil {
		return err
	}
	err = c.s.update(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "create", Resource: "pods", Subresource: "binding", Namespace: ns, Name: b.Name}); err != nil {
			return err
		}
		pod, err := getTyped[*corev1.Pod](tx, pods, ns, b.Name)
		if err != nil {
			return err
		}
		if pod == nil {
			return apierrors.NewNotFound(pods.GroupResource(), b.Name)
		}
		if b.UID != "" && b.UID != pod.UID {
			return apierrors.NewConflict(pods.GroupResource(), b.Name, fmt.Errorf("the binding is for uid %s, the pod is %s", b.UID, pod.UID))
		}
		if pod.Spec.NodeName != "" {
			return apierrors.NewConflict(pods.GroupResource(), b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
		}
		if pod.DeletionTimestamp != nil {
			return apierrors.NewConflict(pods.GroupResource(), b.Name, errors.New("pod is being deleted, cannot be assigned to a host"))
		}
		pod.Spec.NodeName = b.Target.Name
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.s.now())})
		kv, err := put(tx, pods, pod)
		if err != nil {
			return err
		}
		if c.phases != nil {
			c.reportStored(tx, func(rev int64) Phase {
				return Phase{Name: PhaseStorage, Plugin: c.s.storagePlugin(), Summary: fmt.Sprintf("bound %s to node %q at revision %d", kv.Key, b.Target.Name, rev)}
			})
		}
		return nil
	})
	return err
}

func setPodCondition(pod *corev1.Pod, cond corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}

// Delete implements Interface.
func (c *Client) Delete(ctx context.Context, resource, namespace, name string, opts DeleteOptions) (Object, error) {
	res, err := LookupResource(resource)
	if err != nil {
		return nil, err
	}
	if res.Namespaced && namespace == "" {
		namespace = DefaultNamespace
	}
	if !res.Namespaced {
		namespace = ""
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	var out Object
	err = c.s.update(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "delete", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, Name: name}); err != nil {
			return err
		}
		obj, err := getTyped[Object](tx, res, namespace, name)
		if err != nil {
			return err
		}
		if obj == nil {
			return apierrors.NewNotFound(res.GroupResource(), name)
		}
		out, err = c.deleteIn(tx, u, res, obj, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deleteIn deletes obj inside tx, after admission: what a delete and a
// delete of a collection share. It returns the object as marked (a pod
// its kubelet has yet to stop, a Terminating namespace), or nil when it is
// gone.
func (c *Client) deleteIn(tx *store.Tx, u authn.User, res Resource, obj Object, opts DeleteOptions) (Object, error) {
	if err := c.nodeRestriction(tx, u, admission.Delete, res, "", obj.GetNamespace(), obj.GetName(), nil, obj); err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return c.s.deletePod(tx, c, o, opts)
	case *corev1.Namespace:
		return c.s.deleteNamespace(tx, c, o)
	default:
		return nil, c.s.remove(tx, c, res, obj)
	}
}

// DeleteCollection deletes every object of a resource in a namespace (all
// namespaces: "") that opts' selectors match, as DELETE on a collection
// (`DELETE /api/v1/namespaces/default/pods?labelSelector=app=web`, client-go's
// DeleteCollection) does in kube-apiserver: authorized once, with the verb
// "deletecollection", then each object deleted as Delete deletes it (a pod
// on a node gracefully). It returns what it deleted, each as its delete
// left it (marked, or its last state), in one transaction: all or none.
// (kubectl delete --all lists, then deletes one by one.)
func (c *Client) DeleteCollection(ctx context.Context, resource, namespace string, opts DeleteOptions, list ListOptions) (*List, error) {
	res, namespace, err := c.target(resource, namespace, true)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelectors(res, list)
	if err != nil {
		return nil, err
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	out := &List{}
	err = c.s.update(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "deletecollection", APIGroup: res.Group, Resource: res.Name, Namespace: namespace}); err != nil {
			return err
		}
		raw, err := tx.List(res.Prefix(namespace))
		if err != nil {
			return err
		}
		objs, err := decodeAll(ctx, res, raw, sel)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			marked, err := c.deleteIn(tx, u, res, obj, opts)
			if err != nil {
				return fmt.Errorf("deleting %s %q: %w", res.Name, obj.GetName(), err)
			}
			if marked != nil {
				obj = marked
			}
			out.Items = append(out.Items, obj)
		}
		out.ResourceVersion = strconv.FormatInt(tx.Revision(), 10)
		tx.OnCommit(func(rev int64) { out.ResourceVersion = strconv.FormatInt(rev, 10) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// remove deletes an object's key.
func (s *Server) remove(tx *store.Tx, c *Client, res Resource, obj Object) error {
	rv, _ := parseRV(obj.GetResourceVersion())
	kv, err := tx.Delete(res.Key(obj.GetNamespace(), obj.GetName()), rv)
	if err != nil {
		return storeError(res.GroupResource(), obj.GetName(), err)
	}
	if c != nil {
		if c.phases != nil {
			c.reportStored(tx, func(rev int64) Phase {
				return Phase{Name: PhaseStorage, Plugin: s.storagePlugin(), Summary: fmt.Sprintf("deleted %s (revision %d)", kv.Key, rev)}
			})
		}
	}
	return nil
}

// deletePod deletes a pod as Kubernetes does. A pod no node runs (not yet
// scheduled, or already finished) goes at once. A pod on a node is only
// marked: deletionTimestamp is set to now plus the grace period, and the
// node's kubelet stops the containers, then deletes the pod for good with
// a zero grace period. --force (or a zero grace period) skips the kubelet.
func (s *Server) deletePod(tx *store.Tx, c *Client, pod *corev1.Pod, opts DeleteOptions) (Object, error) {
	pods := mustResource("pods")
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if opts.Force || grace <= 0 || pod.Spec.NodeName == "" || terminal {
		if err := s.remove(tx, c, pods, pod); err != nil {
			return nil, err
		}
		if err := s.recountQuotas(tx, pod.Namespace); err != nil {
			return nil, err
		}
		return nil, s.finishNamespace(tx, c, pod.Namespace)
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds <= grace {
		return pod, nil // already being deleted, at least as soon
	}
	ts := metav1.NewTime(s.now().Add(secondsDuration(grace)))
	pod.DeletionTimestamp = &ts
	pod.DeletionGracePeriodSeconds = &grace
	kv, err := put(tx, pods, pod)
	if err != nil {
		return nil, err
	}
	setRV(tx, pod, kv.ModRevision)
	if c != nil {
		if c.phases != nil {
			c.reportStored(tx, func(rev int64) Phase {
				return Phase{Name: PhaseStorage, Plugin: s.storagePlugin(), Summary: fmt.Sprintf("marked %s for deletion at revision %d: deletionTimestamp %s, grace period %ds; the kubelet of node %q stops its containers and removes it", kv.Key, rev, ts.UTC().Format("2006-01-02T15:04:05Z"), grace, pod.Spec.NodeName)}
			})
		}
	}
	return pod, nil
}

// recountQuotas writes the namespace's quotas' usage again after a pod went
// away (kube-controller-manager's quota controller does this in
// Kubernetes; podlab does it in the deleting transaction).
func (s *Server) recountQuotas(tx *store.Tx, namespace string) error {
	quotas, err := listTyped[*corev1.ResourceQuota](tx, mustResource("resourcequotas"), namespace)
	if err != nil || len(quotas) == 0 {
		return err
	}
	pods, err := listTyped[*corev1.Pod](tx, mustResource("pods"), namespace)
	if err != nil {
		return err
	}
	for _, q := range quotas {
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = admission.QuotaUsage(*q, deref(pods))
		if _, err := put(tx, mustResource("resourcequotas"), q); err != nil {
			return err
		}
	}
	return nil
}

// deleteNamespace marks a namespace Terminating and deletes what is in it:
// pods gracefully, everything else at once. The namespace itself goes when
// its last pod does.
func (s *Server) deleteNamespace(tx *store.Tx, c *Client, ns *corev1.Namespace) (Object, error) {
	if notes, err := admission.NamespaceDelete(ns.Name); err != nil || c != nil {
		if err := c.phase(PhaseValidatingAdmission, "NamespaceLifecycle", notes, err); err != nil {
			return nil, err
		}
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		now := metav1.NewTime(s.now())
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		kv, err := put(tx, mustResource("namespaces"), ns)
		if err != nil {
			return nil, err
		}
		setRV(tx, ns, kv.ModRevision)
	}
	for _, r := range resources {
		if !r.Namespaced {
			continue
		}
		objs, err := listTyped[Object](tx, r, ns.Name)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok {
				if _, err := s.deletePod(tx, c, pod, DeleteOptions{}); err != nil {
					return nil, err
				}
				continue
			}
			if err := s.remove(tx, c, r, o); err != nil {
				return nil, err
			}
		}
	}
	if err := s.finishNamespace(tx, c, ns.Name); err != nil {
		return nil, err
	}
	return ns, nil
}

// finishNamespace removes a Terminating namespace once no pod is left in it.
func (s *Server) finishNamespace(tx *store.Tx, c *Client, name string) error {
	nsRes := mustResource("namespaces")
	ns, err := getTyped[*corev1.Namespace](tx, nsRes, "", name)
	if err != nil || ns == nil || ns.Status.Phase != corev1.NamespaceTerminating {
		return err
	}
	left := 0
	if err := tx.ForEach(mustResource("pods").Prefix(name), func(store.KV) error { left++; return nil }); err != nil {
		return err
	}
	if left > 0 {
		return nil
	}
	return s.remove(tx, c, nsRes, ns)
}

func secondsDuration(s int64) time.Duration { return time.Duration(s) * time.Second }

// validateUpdate validates the new object's fields and what changed from
// the old, in one list as kube-apiserver reports them. (Validate would add
// the rules that hold only on create, such as no ephemeral containers.)
func validateUpdate(obj, old Object) error {
	return admission.ValidateUpdate(obj, old)
}
