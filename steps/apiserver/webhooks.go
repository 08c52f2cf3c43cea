package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/webhook"
	"github.com/podlab/podlab/steps/store"
)

type warningsKey struct{}

// WithWarnings returns a context whose requests report their warnings to
// fn: the REST server adds each as a Warning header ("299 - TEXT"), which
// kubectl prints as "Warning: TEXT". Admission webhooks' warnings are
// reported so.
func WithWarnings(ctx context.Context, fn func(string)) context.Context {
	return context.WithValue(ctx, warningsKey{}, fn)
}

func warn(ctx context.Context, msg string) {
	if fn, ok := ctx.Value(warningsKey{}).(func(string)); ok && fn != nil {
		fn(msg)
	}
}

// forRequest is c for one write request: the request's context (its
// deadline, its warnings) reaches admission through it, and with it the
// answers of the request's admission webhooks (see write), the clock of
// the request (admission sees one time however often the write's
// transaction runs) and its narration (each phase said once).
func (c *Client) forRequest(ctx context.Context) *Client {
	cc := *c
	cc.ctx = ctx
	cc.calls = map[string]webhookAnswer{}
	cc.at = c.s.now()
	if c.phases != nil {
		l := &phaseLog{fn: c.phases}
		cc.phases, cc.plog = l.report, l
	}
	return &cc
}

func (c *Client) context() context.Context {
	if c.ctx != nil {
		return c.ctx
	}
	return context.Background()
}

// now is the time of the request (see forRequest), or the server's clock.
func (c *Client) now() time.Time {
	if !c.at.IsZero() {
		return c.at
	}
	return c.s.now()
}

// maxWebhookRounds bounds how often a write's transaction may stop for
// webhooks to be called: once for the mutating ones, once for the
// validating ones, and again each time what they are called with changed
// meanwhile (another client's write of what admission read).
const maxWebhookRounds = 8

// write runs fn, one write's transaction, as kube-apiserver runs a write:
// admission webhooks are called before the storage transaction, holding
// nothing (neither the store's lock nor a transaction), so that a slow
// webhook delays only the request it is called for, and a webhook may
// read and write this API server while it answers.
//
// fn runs admission, authorization included, and the write, as before.
// Where it reaches webhooks it has no answer for (callWebhooks), the
// transaction stops and is rolled back (errNeedWebhooks); the webhooks are
// called (mutating ones in turn, then validating ones in parallel), and fn
// runs again, in a new transaction, with their answers. An answer is used
// only for exactly what it was given: when what admission computed
// changed meanwhile (another client wrote what it read), the webhooks are
// called again, as kube-apiserver's GuaranteedUpdate calls admission again
// after a conflict. What must hold at the write (resourceVersion
// preconditions, the key being free, quota, RBAC's escalation check) is
// checked in the final transaction. fn must start from the request's
// input each time it runs.
func (c *Client) write(ctx context.Context, fn func(tx *store.Tx) error) error {
	for round := 0; ; round++ {
		if c.plog != nil {
			c.plog.rewind()
		}
		err := c.s.update(ctx, fn)
		var need *errNeedWebhooks
		if !errors.As(err, &need) {
			return err
		}
		if round == maxWebhookRounds {
			return apierrors.NewConflict(schema.GroupResource{Group: need.attrs.Resource.Group, Resource: need.attrs.Resource.Resource}, need.attrs.Name,
				fmt.Errorf("what the admission webhooks were called with changed %d times while they answered (other writers of what admission reads): try again", round))
		}
		c.callHooks(ctx, need)
	}
}

// errNeedWebhooks stops a write's transaction where admission needs
// webhooks called: write calls them outside the transaction.
type errNeedWebhooks struct {
	key      string
	mutating bool
	hooks    []webhook.Hook // the ones that match, in order
	attrs    webhook.Attributes
}

func (e *errNeedWebhooks) Error() string {
	return fmt.Sprintf("%d admission webhooks to call before the write", len(e.hooks))
}

// webhookAnswer is what the webhooks of one call of callWebhooks answered.
type webhookAnswer struct {
	object []byte  // mutating: the object after every webhook's patch; nil when none patched it
	phases []Phase // what each webhook decided, as narrated
	err    error   // a webhook's refusal, or its failure under failurePolicy Fail
}

// callWebhooks gives the mutating (mutating true) or validating admission
// webhooks the stored configurations name for a write of obj (old is the
// stored object on an update), in kube-apiserver's order: configurations
// by name, their webhooks in order. A mutating webhook's JSONPatch is
// applied to obj in place. Webhooks are never called for the webhook
// configurations themselves (kube-apiserver's rule: a broken webhook could
// otherwise never be removed), nor for the API server's own writes.
//
// It runs inside the write's transaction, which must not wait for a
// webhook: it uses the answers the webhooks gave for exactly these
// attributes (see write), or stops the transaction with errNeedWebhooks
// for write to call them. Webhooks must tolerate being called more than
// once for one request (sideEffects None), as with kube-apiserver.
func (c *Client) callWebhooks(tx *store.Tx, u authn.User, mutating bool, op admissionv1.Operation, res Resource, ns *corev1.Namespace, obj, old Object) error {
	if c.bootstrap || res.Group == admissionregistrationv1.GroupName {
		return nil
	}
	var hooks []webhook.Hook
	if mutating {
		cfgs, err := listTyped[*admissionregistrationv1.MutatingWebhookConfiguration](tx, mustResource("mutatingwebhookconfigurations"), "")
		if err != nil {
			return err
		}
		hooks = webhook.Mutating(deref(cfgs))
	} else {
		cfgs, err := listTyped[*admissionregistrationv1.ValidatingWebhookConfiguration](tx, mustResource("validatingwebhookconfigurations"), "")
		if err != nil {
			return err
		}
		hooks = webhook.Validating(deref(cfgs))
	}
	if len(hooks) == 0 {
		return nil
	}
	attrs := webhook.Attributes{
		Operation:  op,
		Kind:       metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind},
		Resource:   metav1.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Name},
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		Namespaced: res.Namespaced,
		Object:     obj,
		UserInfo:   authenticationv1.UserInfo{Username: u.Name, Groups: u.Groups},
	}
	if old != nil {
		attrs.OldObject = old
	}
	switch {
	case ns != nil:
		attrs.NamespaceLabels = ns.Labels
	case res.Name == "namespaces" && res.Group == "":
		attrs.NamespaceLabels = obj.GetLabels()
	}
	var matched []webhook.Hook
	for _, h := range hooks {
		ok, err := h.Matches(attrs)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("webhook %q of %s: %w", h.Name, h.Configuration, err))
		}
		if ok {
			matched = append(matched, h)
		}
	}
	if len(matched) == 0 {
		return nil
	}
	if c.calls == nil {
		return apierrors.NewInternalError(fmt.Errorf("admission webhooks reached outside a client's write (Client.write)"))
	}
	key, err := webhookKey(mutating, matched, attrs)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("encoding the admission webhooks' attributes: %w", err))
	}
	a, ok := c.calls[key]
	if !ok {
		attrs.Object = obj.DeepCopyObject()
		if old != nil {
			attrs.OldObject = old.DeepCopyObject()
		}
		return &errNeedWebhooks{key: key, mutating: mutating, hooks: matched, attrs: attrs}
	}
	for _, p := range a.phases {
		c.report(p) // said already, when the webhooks answered (phaseLog)
	}
	if a.object != nil {
		if err := replaceWith(obj, a.object); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("decoding the object the mutating webhooks patched: %w", err))
		}
	}
	return a.err
}

// webhookKey identifies what webhooks are called with: the webhooks and
// the attributes, objects included but for their managedFields' times
// (which a write computes again each time its transaction runs).
func webhookKey(mutating bool, hooks []webhook.Hook, attrs webhook.Attributes) (string, error) {
	strip := func(o runtime.Object) runtime.Object {
		obj, ok := o.(Object)
		if !ok || len(obj.GetManagedFields()) == 0 {
			return o
		}
		cp := obj.DeepCopyObject().(Object)
		mf := cp.GetManagedFields()
		for i := range mf {
			mf[i].Time = nil
		}
		cp.SetManagedFields(mf)
		return cp
	}
	attrs.Object, attrs.OldObject = strip(attrs.Object), strip(attrs.OldObject)
	data, err := json.Marshal(struct {
		Mutating bool
		Hooks    []webhook.Hook
		Attrs    webhook.Attributes
	}{mutating, hooks, attrs})
	return string(data), err
}

// callHooks calls the webhooks a write's transaction stopped for, holding
// nothing, and keeps their answer for the transaction's next run:
// mutating webhooks one after the other, each given what the previous one
// made of the object; validating ones in parallel, as kube-apiserver
// calls them (a refusal is the first one's, in their order).
func (c *Client) callHooks(ctx context.Context, need *errNeedWebhooks) {
	name := PhaseValidatingAdmission
	if need.mutating {
		name = PhaseMutatingAdmission
	}
	var a webhookAnswer
	rc := *c // narrates as c, and records what it says for the next run
	rc.phases = func(p Phase) {
		a.phases = append(a.phases, p)
		c.report(p)
	}
	results := make([]webhook.Result, len(need.hooks))
	errs := make([]error, len(need.hooks))
	if need.mutating {
		obj := need.attrs.Object.(Object)
		patched := false
		for i, h := range need.hooks {
			attrs := need.attrs
			attrs.Object = obj
			results[i], errs[i] = webhook.Call(ctx, h, attrs)
			for _, w := range results[i].Warnings {
				warn(ctx, w)
			}
			proceed, err := rc.webhookOutcome(name, h, results[i], errs[i], obj)
			if err != nil {
				a.err = err
				break
			}
			if proceed && results[i].Object != nil {
				patched = true
			}
		}
		if patched && a.err == nil {
			data, err := json.Marshal(obj)
			if err != nil {
				a.err = apierrors.NewInternalError(fmt.Errorf("encoding the object the mutating webhooks patched: %w", err))
			}
			a.object = data
		}
	} else {
		var wg sync.WaitGroup
		for i, h := range need.hooks {
			wg.Go(func() { results[i], errs[i] = webhook.Call(ctx, h, need.attrs) })
		}
		wg.Wait()
		for i, h := range need.hooks {
			for _, w := range results[i].Warnings {
				warn(ctx, w)
			}
			if _, err := rc.webhookOutcome(name, h, results[i], errs[i], nil); err != nil && a.err == nil {
				a.err = err
			}
		}
	}
	c.calls[need.key] = a
}

// webhookOutcome narrates what one webhook answered and returns the
// request's error, if it stops the request. A mutating webhook's patched
// object replaces obj. proceed is false for a webhook skipped under
// failurePolicy Ignore.
func (c *Client) webhookOutcome(name string, h webhook.Hook, result webhook.Result, err error, obj Object) (proceed bool, _ error) {
	plugin := fmt.Sprintf("webhook %q", h.Name)
	var callErr *webhook.CallError
	switch {
	case errors.As(err, &callErr) && h.FailurePolicy == admissionregistrationv1.Ignore:
		c.phase(name, plugin, []string{callErr.Error() + " (failurePolicy Ignore: the request goes on without it)"}, nil)
		return false, nil
	case errors.As(err, &callErr):
		return false, c.phase(name, plugin, []string{callErr.Error() + " (failurePolicy Fail)"}, apierrors.NewInternalError(callErr))
	case err != nil:
		return false, c.phase(name, plugin, nil, err)
	}
	var notes []string
	if result.Object != nil && obj != nil {
		if err := replaceWith(obj, result.Object); err != nil {
			return false, c.phase(name, plugin, nil, apierrors.NewInternalError(fmt.Errorf("decoding the object webhook %q patched: %w", h.Name, err)))
		}
		notes = append(notes, "applied its JSONPatch "+string(result.Patch))
	} else {
		notes = append(notes, "allowed")
	}
	for _, w := range result.Warnings {
		notes = append(notes, "Warning: "+w)
	}
	c.phase(name, plugin, notes, nil)
	return true, nil
}

// phaseLog says each phase of a request once, though the write's
// transaction runs again (after its webhooks are called, or on etcd after
// a conflict) and says its phases again: a phase that repeats, in its
// place, what an earlier run said is not said again.
type phaseLog struct {
	fn   func(Phase)
	said []string // the lines said, in order
	n    int      // how many of them this run has said again
}

func (l *phaseLog) rewind() { l.n = 0 }

func (l *phaseLog) report(p Phase) {
	line := p.Line() + "\x00" + strings.Join(p.Details, "\n")
	if l.n < len(l.said) && l.said[l.n] == line {
		l.n++
		return
	}
	l.said = append(l.said[:l.n], line)
	l.n++
	l.fn(p)
}

// replaceWith decodes data into obj, in place: what a mutating webhook's
// patch made of it.
func replaceWith(obj Object, data []byte) error {
	fresh := reflect.New(reflect.TypeOf(obj).Elem())
	if err := json.Unmarshal(data, fresh.Interface()); err != nil {
		return err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	reflect.ValueOf(obj).Elem().Set(fresh.Elem())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
