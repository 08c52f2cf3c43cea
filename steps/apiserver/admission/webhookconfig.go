package admission

import (
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admission webhooks: MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1) name
// HTTPS servers the API server calls during admission. The defaults and
// the checks here are kube's (pkg/apis/admissionregistration/v1/defaults.go
// and validation), for what podlab supports: a webhook reached by url (the
// lab has no Services), and v1 AdmissionReviews.

// DefaultMutatingWebhookConfiguration sets what kube-apiserver fills in on
// each webhook of a MutatingWebhookConfiguration.
func DefaultMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) []string {
	d := &defaulter{}
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		at := fmt.Sprintf("webhooks[%d]", i)
		defaultWebhook(d, at, &w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
		if w.ReinvocationPolicy == nil {
			w.ReinvocationPolicy = ptr(admissionregistrationv1.NeverReinvocationPolicy)
			d.set(at+".reinvocationPolicy", admissionregistrationv1.NeverReinvocationPolicy)
		}
	}
	return d.notes
}

// DefaultValidatingWebhookConfiguration sets what kube-apiserver fills in
// on each webhook of a ValidatingWebhookConfiguration.
func DefaultValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) []string {
	d := &defaulter{}
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		defaultWebhook(d, fmt.Sprintf("webhooks[%d]", i), &w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
	}
	return d.notes
}

func defaultWebhook(d *defaulter, at string, fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations) {
	if *fp == nil {
		*fp = ptr(admissionregistrationv1.Fail)
		d.set(at+".failurePolicy", admissionregistrationv1.Fail)
	}
	if *mp == nil {
		*mp = ptr(admissionregistrationv1.Equivalent)
		d.set(at+".matchPolicy", admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
		d.set(at+".namespaceSelector", "{}")
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
		d.set(at+".objectSelector", "{}")
	}
	if *timeout == nil {
		*timeout = ptr(int32(10))
		d.set(at+".timeoutSeconds", 10)
	}
	for j := range rules {
		if rules[j].Scope == nil {
			rules[j].Scope = ptr(admissionregistrationv1.AllScopes)
			d.set(fmt.Sprintf("%s.rules[%d].scope", at, j), admissionregistrationv1.AllScopes)
		}
	}
}

// webhookFields is what validation reads of either kind of webhook.
type webhookFields struct {
	name                    string
	clientConfig            admissionregistrationv1.WebhookClientConfig
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           *admissionregistrationv1.FailurePolicyType
	sideEffects             *admissionregistrationv1.SideEffectClass
	timeoutSeconds          *int32
	admissionReviewVersions []string
	namespaceSelector       *metav1.LabelSelector
	objectSelector          *metav1.LabelSelector
}

func mutatingFields(ws []admissionregistrationv1.MutatingWebhook) []webhookFields {
	out := make([]webhookFields, len(ws))
	for i, w := range ws {
		out[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector}
	}
	return out
}

func validatingFields(ws []admissionregistrationv1.ValidatingWebhook) []webhookFields {
	out := make([]webhookFields, len(ws))
	for i, w := range ws {
		out[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector}
	}
	return out
}

// validateWebhooks is kube's validateMutatingWebhook/validateValidatingWebhook
// for the fields podlab reads, with kube's texts.
func validateWebhooks(ws []webhookFields) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, w := range ws {
		at := field.NewPath("webhooks").Index(i)
		if names.Has(w.name) {
			errs = append(errs, field.Duplicate(at.Child("name"), w.name))
		}
		names.Insert(w.name)
		if w.name == "" {
			errs = append(errs, field.Required(at.Child("name"), ""))
		} else if len(strings.Split(w.name, ".")) < 3 {
			errs = append(errs, field.Invalid(at.Child("name"), w.name, "should be a domain with at least three segments separated by dots"))
		}
		for j, r := range w.rules {
			errs = append(errs, validateRule(r, at.Child("rules").Index(j))...)
		}
		if w.failurePolicy != nil && *w.failurePolicy != admissionregistrationv1.Fail && *w.failurePolicy != admissionregistrationv1.Ignore {
			errs = append(errs, field.NotSupported(at.Child("failurePolicy"), *w.failurePolicy, []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}))
		}
		switch {
		case w.sideEffects == nil:
			errs = append(errs, field.Required(at.Child("sideEffects"), fmt.Sprintf("must specify one of %s, %s", admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.SideEffectClassNoneOnDryRun)))
		case *w.sideEffects != admissionregistrationv1.SideEffectClassNone && *w.sideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun:
			errs = append(errs, field.NotSupported(at.Child("sideEffects"), *w.sideEffects, []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}))
		}
		if w.timeoutSeconds != nil && (*w.timeoutSeconds < 1 || *w.timeoutSeconds > 30) {
			errs = append(errs, field.Invalid(at.Child("timeoutSeconds"), *w.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
		}
		switch {
		case len(w.admissionReviewVersions) == 0:
			errs = append(errs, field.Required(at.Child("admissionReviewVersions"), "must specify one of v1, v1beta1"))
		case !sets.New(w.admissionReviewVersions...).Has("v1"):
			// kube accepts v1beta1 too; podlab speaks only v1
			errs = append(errs, field.Invalid(at.Child("admissionReviewVersions"), w.admissionReviewVersions, "must include at least one of v1 (podlab's API server speaks AdmissionReview v1 only)"))
		}
		if w.namespaceSelector != nil {
			errs = append(errs, metavalidation.ValidateLabelSelector(w.namespaceSelector, metavalidation.LabelSelectorValidationOptions{}, at.Child("namespaceSelector"))...)
		}
		if w.objectSelector != nil {
			errs = append(errs, metavalidation.ValidateLabelSelector(w.objectSelector, metavalidation.LabelSelectorValidationOptions{}, at.Child("objectSelector"))...)
		}
		errs = append(errs, validateClientConfig(w.clientConfig, at.Child("clientConfig"))...)
	}
	return errs
}

func validateRule(r admissionregistrationv1.RuleWithOperations, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(at.Child("operations"), ""))
	}
	ops := []string{string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create), string(admissionregistrationv1.Update), string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect)}
	for k, op := range r.Operations {
		if !sets.New(ops...).Has(string(op)) {
			errs = append(errs, field.NotSupported(at.Child("operations").Index(k), op, ops))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(at.Child("apiGroups"), ""))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(at.Child("apiVersions"), ""))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(at.Child("resources"), ""))
	}
	if r.Scope != nil {
		scopes := []string{string(admissionregistrationv1.AllScopes), string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope)}
		if !sets.New(scopes...).Has(string(*r.Scope)) {
			errs = append(errs, field.NotSupported(at.Child("scope"), *r.Scope, scopes))
		}
	}
	return errs
}

func validateClientConfig(cc admissionregistrationv1.WebhookClientConfig, at *field.Path) field.ErrorList {
	switch {
	case cc.URL == nil && cc.Service == nil:
		return field.ErrorList{field.Required(at, "exactly one of url or service is required")}
	case cc.URL != nil && cc.Service != nil:
		return field.ErrorList{field.Required(at, "exactly one of url or service is required")}
	case cc.Service != nil:
		return field.ErrorList{field.Forbidden(at.Child("service"), "podlab has no Services to resolve: name the webhook server by url (https://HOST:PORT/PATH)")}
	}
	u, err := url.Parse(*cc.URL)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(at.Child("url"), *cc.URL, "url must be a valid URL: "+err.Error())}
	case u.Scheme != "https":
		return field.ErrorList{field.Invalid(at.Child("url"), *cc.URL, "'https' is the only allowed URL scheme")}
	case u.Host == "":
		return field.ErrorList{field.Invalid(at.Child("url"), *cc.URL, "host must be specified")}
	case u.User != nil:
		return field.ErrorList{field.Invalid(at.Child("url"), *cc.URL, "user information is not permitted in the URL")}
	case u.Fragment != "" || u.RawQuery != "":
		return field.ErrorList{field.Invalid(at.Child("url"), *cc.URL, "fragments and query parameters are not permitted in the URL")}
	}
	return nil
}
