package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// forRequest is c for one request: the request's context (its deadline,
// its warnings) reaches admission through it.
func (c *Client) forRequest(ctx context.Context) *Client {
	cc := *c
	cc.ctx = ctx
	return &cc
}

func (c *Client) context() context.Context {
	if c.ctx != nil {
		return c.ctx
	}
	return context.Background()
}

// callWebhooks calls the mutating (mutating true) or validating admission
// webhooks the stored configurations name for a write of obj (old is the
// stored object on an update), in kube-apiserver's order: configurations
// by name, their webhooks in order. A mutating webhook's JSONPatch is
// applied to obj in place. Webhooks are never called for the webhook
// configurations themselves (kube-apiserver's rule: a broken webhook could
// otherwise never be removed), nor for the API server's own writes.
//
// Unlike kube-apiserver, podlab calls them inside the write's transaction
// (admission reads the configurations, like the quotas, in it): other
// writes wait for a slow webhook, at most its timeoutSeconds, and a webhook
// must not write to this API server while it answers. On etcd a write
// retried after a conflict calls the webhooks again, as kube-apiserver may
// (webhooks must tolerate being called more than once: sideEffects None).
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
	name := PhaseValidatingAdmission
	if mutating {
		name = PhaseMutatingAdmission
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
	ctx := c.context()
	for _, h := range hooks {
		ok, err := h.Matches(attrs)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("webhook %q of %s: %w", h.Name, h.Configuration, err))
		}
		if !ok {
			continue
		}
		plugin := fmt.Sprintf("webhook %q", h.Name)
		result, err := webhook.Call(ctx, h, attrs)
		for _, w := range result.Warnings {
			warn(ctx, w)
		}
		var callErr *webhook.CallError
		switch {
		case errors.As(err, &callErr) && h.FailurePolicy == admissionregistrationv1.Ignore:
			c.phase(name, plugin, []string{callErr.Error() + " (failurePolicy Ignore: the request goes on without it)"}, nil)
			continue
		case errors.As(err, &callErr):
			return c.phase(name, plugin, []string{callErr.Error() + " (failurePolicy Fail)"}, apierrors.NewInternalError(callErr))
		case err != nil:
			return c.phase(name, plugin, nil, err)
		}
		var notes []string
		if result.Object != nil {
			if err := replaceWith(obj, result.Object); err != nil {
				return c.phase(name, plugin, nil, apierrors.NewInternalError(fmt.Errorf("decoding the object webhook %q patched: %w", h.Name, err)))
			}
			notes = append(notes, "applied its JSONPatch "+string(result.Patch))
		} else {
			notes = append(notes, "allowed")
		}
		for _, w := range result.Warnings {
			notes = append(notes, "Warning: "+w)
		}
		c.phase(name, plugin, notes, nil)
	}
	return nil
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
