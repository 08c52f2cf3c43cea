package rest

import (
	"context"
	"errors"
	"github.com/podlab/podlab/internal/testenv/webhookserver"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/discovery"
	"github.com/podlab/podlab/steps/apiserver/webhook"
)

// podCreateHook is a webhook of pod creates, on namespaces labelled sel
// (none: every namespace), failurePolicy policy, timeoutSeconds 30.
func podCreateHook(name, url string, ca []byte, sel map[string]string, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	w := admissionregistrationv1.ValidatingWebhook{
		Name:         name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		FailurePolicy:           &policy,
		TimeoutSeconds:          new(int32(30)),
		SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	if sel != nil {
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return w
}

// One slow admission webhook delays only the request it is called for, as
// with kube-apiserver, which calls webhooks before storage holding
// nothing: while it sleeps, other writes, reads, another user's get and an
// unauthenticated /readyz are answered at once. (podlab called webhooks
// inside the store's write transaction: each of them waited the whole
// sleep.)
func TestWebhooks_SlowWebhookStallsNothingElse(t *testing.T) {
	health, err := discovery.Handler(discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, nil, WithFallback(health))
	admin := l.clientset("admin")
	const sleep = 5 * time.Second
	called := make(chan struct{}, 1)
	url, ca := webhookserver.Serve(t, webhook.Policy{}, func(r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-time.After(sleep):
		case <-r.Context().Done():
		}
	})
	if _, err := admin.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slow", Labels: map[string]string{"slow": "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{podCreateHook("slow.podlab.test", url+"/validate", ca, map[string]string{"slow": "yes"}, admissionregistrationv1.Ignore)}}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx(t), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx(t), testPod("seen"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	slowDone := make(chan error, 1)
	start := time.Now()
	go func() {
		p := testPod("slow")
		p.Namespace = "slow"
		_, err := admin.CoreV1().Pods("slow").Create(context.Background(), p, metav1.CreateOptions{})
		slowDone <- err
	}()
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook was not called for a pod create in namespace slow")
	}

	// each well under the webhook's sleep; usually a few milliseconds
	const bound = 1500 * time.Millisecond
	viewer := l.clientset("viewer")
	checks := []struct {
		name string
		do   func(context.Context) error
	}{
		{"a namespace create", func(ctx context.Context) error {
			_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
			return err
		}},
		{"a pod create in default", func(ctx context.Context) error {
			_, err := admin.CoreV1().Pods("default").Create(ctx, testPod("quick"), metav1.CreateOptions{})
			return err
		}},
		{"a list of pods", func(ctx context.Context) error {
			_, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"a viewer's get", func(ctx context.Context) error {
			_, err := viewer.CoreV1().Pods("default").Get(ctx, "seen", metav1.GetOptions{})
			return err
		}},
		{"an unauthenticated /readyz", func(context.Context) error {
			if code, body, _ := l.do("", "GET", "/readyz", "", nil); code != 200 {
				return errors.New(string(body))
			}
			return nil
		}},
	}
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t0 := time.Now()
		err := c.do(cctx)
		took := time.Since(t0)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s while the webhook slept: %v", c.name, took.Round(time.Millisecond))
		if took > bound {
			t.Errorf("%s took %v while the webhook slept (bound %v): it waited for another request's webhook", c.name, took.Round(time.Millisecond), bound)
		}
	}
	select {
	case err := <-slowDone:
		t.Fatalf("the slow create returned (%v) after %v, before the checks ended: they did not run while the webhook slept", err, time.Since(start).Round(time.Millisecond))
	default:
	}
	if err := <-slowDone; err != nil {
		t.Errorf("the slow create: %v", err)
	}
	if took := time.Since(start); took < sleep {
		t.Errorf("the slow create took %v, less than its webhook's sleep", took)
	}
}

// A webhook may read and write the API server while it answers (it was a
// deadlock: the webhook waited for the store's lock, which the write it
// answered held until the webhook's timeout). Validating webhooks are
// called in parallel, as kube-apiserver calls them.
func TestWebhooks_CallTheAPI(t *testing.T) {
	l := newLab(t, nil)
	admin := l.clientset("admin")
	var asked atomic.Int32
	var apiErr atomic.Value
	url, ca := webhookserver.Serve(t, webhook.Policy{}, func(r *http.Request) {
		n := asked.Add(1)
		cctx, cancel := context.WithTimeout(r.Context(), 8*time.Second)
		defer cancel()
		if _, err := admin.CoreV1().Pods("default").List(cctx, metav1.ListOptions{}); err != nil {
			apiErr.Store("list: " + err.Error())
			return
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "from-webhook-" + string(rune('a'+n))}}
		if _, err := admin.CoreV1().Namespaces().Create(cctx, ns, metav1.CreateOptions{}); err != nil {
			apiErr.Store("create: " + err.Error())
			return
		}
		time.Sleep(2 * time.Second) // both webhooks at once: 2 s in all, not 4
	})
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "reads-and-writes"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			podCreateHook("one.podlab.test", url+"/validate", ca, nil, admissionregistrationv1.Fail),
			podCreateHook("two.podlab.test", url+"/validate", ca, nil, admissionregistrationv1.Fail),
		}}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx(t), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err := admin.CoreV1().Pods("default").Create(ctx(t), testPod("web"), metav1.CreateOptions{})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if e := apiErr.Load(); e != nil {
		t.Errorf("the webhook's own request to the API server: %v", e)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("%d webhook calls, want 2", n)
	}
	for _, name := range []string{"from-webhook-b", "from-webhook-c"} {
		if _, err := admin.CoreV1().Namespaces().Get(ctx(t), name, metav1.GetOptions{}); err != nil {
			t.Errorf("the namespace the webhook created: %v", err)
		}
	}
	if took > 3500*time.Millisecond {
		t.Errorf("the create took %v with two validating webhooks of 2 s each: they were not called in parallel", took.Round(time.Millisecond))
	}
}
