package apiserver

import (
	"crypto/x509"
	"github.com/podlab/podlab/internal/testenv/webhookserver"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/webhook"
	"github.com/podlab/podlab/steps/pki"
)

func mutatingConfig(name, url string, ca []byte, mod ...func(*admissionregistrationv1.MutatingWebhook)) *admissionregistrationv1.MutatingWebhookConfiguration {
	w := admissionregistrationv1.MutatingWebhook{
		Name:         name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	for _, m := range mod {
		m(&w)
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(name, ".", "-")}, Webhooks: []admissionregistrationv1.MutatingWebhook{w}}
}

func validatingConfig(name, url string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	m := mutatingConfig(name, url, ca)
	w := m.Webhooks[0]
	w.Rules[0].Operations = append(w.Rules[0].Operations, admissionregistrationv1.Update)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: m.ObjectMeta, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name: w.Name, ClientConfig: w.ClientConfig, Rules: w.Rules, SideEffects: w.SideEffects, AdmissionReviewVersions: w.AdmissionReviewVersions,
	}}}
}

func TestServer_Webhooks_MutateAndDeny(t *testing.T) {
	s, _ := testServer(t)
	var phases []Phase
	admin := as(t, s, "admin", WithPhases(func(p Phase) { phases = append(phases, p) }))
	var calls atomic.Int32
	url, ca := webhookserver.Serve(t, webhook.Policy{AddLabels: map[string]string{"team": "lab"}, DenyLabel: "env=forbidden"}, func(*http.Request) { calls.Add(1) })
	if _, err := admin.Create(ctx(t), mutatingConfig("team-label.podlab.test", url+"/mutate", ca)); err != nil {
		t.Fatalf("create MutatingWebhookConfiguration: %v", err)
	}
	if _, err := admin.Create(ctx(t), validatingConfig("deny.podlab.test", url+"/validate", ca)); err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration: %v", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d webhook calls for the configurations themselves, want none", n)
	}

	var warnings []string
	wctx := WithWarnings(ctx(t), func(w string) { warnings = append(warnings, w) })
	obj, err := admin.Create(wctx, testPod("web"))
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if got := obj.(*corev1.Pod).Labels["team"]; got != "lab" {
		t.Errorf("created pod's labels %v: the mutating webhook's patch was not applied", obj.(*corev1.Pod).Labels)
	}
	stored, err := admin.Get(ctx(t), "pods", "default", "web")
	if err != nil || stored.GetLabels()["team"] != "lab" {
		t.Errorf("stored pod labels %v, %v: want team=lab", stored.GetLabels(), err)
	}
	if want := []string{"podlab's mutating webhook added label team=lab"}; strings.Join(warnings, "|") != strings.Join(want, "|") {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	var order []string
	for _, p := range phases {
		if strings.HasPrefix(p.Plugin, "webhook ") {
			order = append(order, p.Name+" "+p.Plugin)
		}
	}
	if want := []string{`mutating admission webhook "team-label.podlab.test"`, `validating admission webhook "deny.podlab.test"`}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("webhook phases %q, want %q", order, want)
	}
	// each webhook is called once, though the write's transaction runs
	// three times (it stops for the mutating, then the validating ones)
	if n := calls.Load(); n != 2 {
		t.Errorf("%d webhook calls for one create, want 2 (one each)", n)
	}

	bad := testPod("bad")
	bad.Labels = map[string]string{"env": "forbidden"}
	before := revision(t, s)
	_, err = admin.Create(ctx(t), bad)
	want := `admission webhook "deny.podlab.test" denied the request: objects labelled env=forbidden are not allowed here (podlab webhook serve --deny-label env=forbidden)`
	if err == nil || err.Error() != want {
		t.Errorf("create a denied pod: %v, want %q", err, want)
	}
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusForbidden {
		t.Errorf("denied: %#v, want the code the webhook answered (403)", err)
	}
	if after := revision(t, s); after != before {
		t.Errorf("a denied create moved the store from revision %d to %d", before, after)
	}

	// an update goes through the validating webhook too
	stored.SetLabels(map[string]string{"env": "forbidden"})
	if _, err := admin.Update(ctx(t), stored); err == nil || !strings.Contains(err.Error(), `admission webhook "deny.podlab.test" denied the request`) {
		t.Errorf("update adding the denied label: %v, want the webhook's denial", err)
	}
}

func TestServer_Webhooks_FailurePolicy(t *testing.T) {
	// a port nothing listens on: take one, then close it
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String() + "/mutate"
	ln.Close()
	var calls atomic.Int32
	live, ca := webhookserver.Serve(t, webhook.Policy{AddLabels: map[string]string{"team": "lab"}}, func(*http.Request) { calls.Add(1) })
	otherCA, err := pki.NewCA("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	slow := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	slow.StartTLS()
	t.Cleanup(slow.Close)
	slowCA := pemOf(slow.Certificate())

	for _, tc := range []struct {
		name    string
		cfg     *admissionregistrationv1.MutatingWebhookConfiguration
		wantErr string // "" for a pod created
		labeled bool
	}{
		{"refused, Fail", mutatingConfig("dead.podlab.test", dead, ca), `Internal error occurred: failed calling webhook "dead.podlab.test": failed to call webhook: Post "` + dead + `?timeout=10s": dial tcp`, false},
		{"refused, Ignore", mutatingConfig("dead.podlab.test", dead, ca, func(w *admissionregistrationv1.MutatingWebhook) {
			w.FailurePolicy = new(admissionregistrationv1.Ignore)
		}), "", false},
		{"caBundle of another CA", mutatingConfig("untrusted.podlab.test", live+"/mutate", otherCA.CertPEM()), `failed calling webhook "untrusted.podlab.test": failed to call webhook: Post "` + live + `/mutate?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority`, false},
		{"timeoutSeconds", mutatingConfig("slow.podlab.test", slow.URL+"/mutate", slowCA, func(w *admissionregistrationv1.MutatingWebhook) {
			w.TimeoutSeconds = new(int32(1))
		}), `failed calling webhook "slow.podlab.test": failed to call webhook: Post "` + slow.URL + `/mutate?timeout=1s": context deadline exceeded`, false},
		{"objectSelector does not match", mutatingConfig("team.podlab.test", live+"/mutate", ca, func(w *admissionregistrationv1.MutatingWebhook) {
			w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "yes"}}
		}), "", false},
		{"namespaceSelector does not match", mutatingConfig("team.podlab.test", live+"/mutate", ca, func(w *admissionregistrationv1.MutatingWebhook) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}
		}), "", false},
		{"rule for deployments only", mutatingConfig("team.podlab.test", live+"/mutate", ca, func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].APIGroups, w.Rules[0].Resources = []string{"apps"}, []string{"deployments"}
		}), "", false},
		{"rule for every resource", mutatingConfig("team.podlab.test", live+"/mutate", ca, func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].APIGroups, w.Rules[0].APIVersions, w.Rules[0].Resources = []string{"*"}, []string{"*"}, []string{"*"}
		}), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := testServer(t)
			admin := as(t, s, "admin")
			if _, err := admin.Create(ctx(t), tc.cfg); err != nil {
				t.Fatalf("create configuration: %v", err)
			}
			start := time.Now()
			obj, err := admin.Create(ctx(t), testPod("web"))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("create pod: %v, want it created", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("create pod: %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr != "" && !apierrors.IsInternalError(err):
				t.Errorf("create pod: %v is not a 500 InternalError, as kube-apiserver's failurePolicy Fail", err)
			case err == nil:
				if got := obj.GetLabels()["team"] == "lab"; got != tc.labeled {
					t.Errorf("pod labels %v, want labelled by the webhook: %v", obj.GetLabels(), tc.labeled)
				}
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("the create took %s: the webhook's timeout did not bound it", took)
			}
		})
	}
}

func pemOf(c *x509.Certificate) []byte {
	return (&pki.KeyPair{Cert: c}).CertPEM()
}

func TestServer_WebhookConfiguration_Invalid(t *testing.T) {
	good := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		return mutatingConfig("team.podlab.test", "https://127.0.0.1:8443/mutate", nil)
	}
	for _, tc := range []struct {
		name string
		mod  func(*admissionregistrationv1.MutatingWebhook)
		want string
	}{
		{"name of two segments", func(w *admissionregistrationv1.MutatingWebhook) { w.Name = "podlab.test" },
			`webhooks[0].name: Invalid value: "podlab.test": should be a domain with at least three segments separated by dots`},
		{"http url", func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.URL = new("http://127.0.0.1/mutate") },
			`webhooks[0].clientConfig.url: Invalid value: "http://127.0.0.1/mutate": 'https' is the only allowed URL scheme`},
		{"no url nor service", func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.URL = nil },
			`webhooks[0].clientConfig: Required value: exactly one of url or service is required`},
		{"a service", func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig.URL = nil
			w.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"}
		}, `webhooks[0].clientConfig.service: Forbidden: podlab has no Services to resolve`},
		{"no sideEffects", func(w *admissionregistrationv1.MutatingWebhook) { w.SideEffects = nil },
			`webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun`},
		{"sideEffects Some", func(w *admissionregistrationv1.MutatingWebhook) {
			w.SideEffects = new(admissionregistrationv1.SideEffectClassSome)
		},
			`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`},
		{"timeout 31", func(w *admissionregistrationv1.MutatingWebhook) { w.TimeoutSeconds = new(int32(31)) },
			`webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds`},
		{"no admissionReviewVersions", func(w *admissionregistrationv1.MutatingWebhook) { w.AdmissionReviewVersions = nil },
			`webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1`},
		{"no operations", func(w *admissionregistrationv1.MutatingWebhook) { w.Rules[0].Operations = nil },
			`webhooks[0].rules[0].operations: Required value`},
		{"failurePolicy Maybe", func(w *admissionregistrationv1.MutatingWebhook) {
			w.FailurePolicy = new(admissionregistrationv1.FailurePolicyType("Maybe"))
		},
			`webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := testServer(t)
			cfg := good()
			tc.mod(&cfg.Webhooks[0])
			_, err := as(t, s, "admin").Create(ctx(t), cfg)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: %v\nwant Invalid with %q", err, tc.want)
			}
		})
	}
	// the defaults kube-apiserver sets
	s, _ := testServer(t)
	obj, err := as(t, s, "admin").Create(ctx(t), good())
	if err != nil {
		t.Fatal(err)
	}
	w := obj.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[0]
	if *w.FailurePolicy != admissionregistrationv1.Fail || *w.MatchPolicy != admissionregistrationv1.Equivalent || *w.TimeoutSeconds != 10 ||
		w.NamespaceSelector == nil || w.ObjectSelector == nil || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || *w.Rules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("defaults not set as kube-apiserver sets them: %+v", w)
	}
}
