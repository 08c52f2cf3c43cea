package kubelet_test

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"

	"github.com/podlab/podlab/steps/apiserver"
	apiremote "github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/kubelet"
)

// newClusterOverTheNetwork is newCluster with node-1's kubelet a client of
// the API server over HTTPS (steps/apiserver/rest behind a TLS test
// server, steps/apiserver/remote in front), as `podlab kubelet` is: the
// Node authorizer and NodeRestriction judge its requests as they come
// over the wire.
func newClusterOverTheNetwork(t *testing.T) *cluster {
	t.Helper()
	var cfg kubelet.Config
	c := newCluster(t, func(k *kubelet.Config) { cfg = *k })
	srv := httptest.NewTLSServer(rest.New(c.srv, rest.WithAuthenticator("token file", c.srv.Tokens())))
	inProcess := cfg
	t.Cleanup(func() {
		// newCluster's cleanup, which runs after this one, cleans the
		// node up in-process
		if k, err := kubelet.New(inProcess); err == nil {
			c.kubelet = k
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	token, err := c.srv.Tokens().TokenFor("system:node:" + apiserver.HostNode)
	if err != nil {
		t.Fatal(err)
	}
	node, err := apiremote.New(&restclient.Config{Host: srv.URL, BearerToken: token, QPS: -1,
		TLSClientConfig: restclient.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client = node
	c.node = node
	if c.kubelet, err = kubelet.New(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// Everything a kubelet asks of the API server works over the network,
// as system:node:node-1 under the Node authorizer and NodeRestriction:
// registering its Node and posting its status, reading its pod, the pod's
// status and events, and deleting the pod once its containers are
// stopped; and its Run loop watches over the wire. (ConfigMaps and Secrets
// are not among the resources podlab's API server serves yet, so a pod's
// env from them is not tried here.)
func TestKubelet_OverTheNetwork(t *testing.T) {
	c := newClusterOverTheNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.kubelet.Register(ctx)
	if err != nil || !res.Created {
		t.Fatalf("registering node-1 over the network: %+v, %v", res, err)
	}
	if _, err := c.kubelet.Heartbeat(ctx); err != nil {
		t.Fatalf("node-1's heartbeat over the network: %v", err)
	}

	pod := helloPod(t, "net")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
	}
	c.create(t, pod)

	// Run watches the pods bound to node-1 over the wire and syncs them.
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- c.kubelet.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	running := waitPod(t, c, "net", 60*time.Second, "Running", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	var env []string
	for _, r := range c.stageReports() {
		if cr, ok := r.Result.(*kubelet.CreateResult); ok && r.Err == nil {
			for _, kv := range cr.Config.GetEnvs() {
				env = append(env, kv.Key+"="+string(kv.Value))
			}
		}
	}
	for _, want := range []string{"NODE=" + apiserver.HostNode} {
		if !slices.Contains(env, want) {
			t.Errorf("the container's environment lacks %s: %v", want, env)
		}
	}
	if ev := c.events(t, running); !hasEvent(ev, "Normal Started") {
		t.Errorf("no Started event written by the kubelet over the network: %v", ev)
	}

	// Graceful deletion: the kubelet stops the container, then deletes the
	// pod for good.
	if _, err := c.admin.Delete(ctx, "pods", "default", "net", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, "net", 60*time.Second, "gone", func(p *corev1.Pod) bool { return p == nil })
}

// waitPod waits until cond holds for the pod (nil once it is gone).
func waitPod(t *testing.T, c *cluster, name string, within time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		obj, err := c.admin.Get(context.Background(), "pods", "default", name)
		var p *corev1.Pod
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			p = obj.(*corev1.Pod)
		}
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			status := "gone"
			if p != nil {
				status = statusText(p)
			}
			t.Fatalf("pod %s: not %s after %s; status:\n%s", name, what, within, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
