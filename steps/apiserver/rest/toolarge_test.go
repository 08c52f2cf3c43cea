package rest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/remote"
)

// tooLarge checks a Status is kube-apiserver's answer for a revision the
// store has not reached (k8s.io/apiserver/pkg/storage's
// NewTooLargeResourceVersionError): 504 Timeout, "Too large resource
// version: WANT, current: N", the cause ResourceVersionTooLarge.
func tooLarge(t *testing.T, what string, st metav1.Status, want int64) {
	t.Helper()
	prefix := fmt.Sprintf("Timeout: Too large resource version: %d, current: ", want)
	if st.Code != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout || !strings.HasPrefix(st.Message, prefix) ||
		st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge ||
		st.Details.Causes[0].Message != "Too large resource version" {
		t.Errorf("%s: Status %d %q %q %+v; want 504 Timeout %q... with the cause %s", what, st.Code, st.Reason, st.Message, st.Details, prefix, metav1.CauseTypeResourceVersionTooLarge)
	}
}

// A watch or a list from a revision the store has not reached (the API
// server's store was switched, or restored, under its clients) is
// kube-apiserver's 504 "Too large resource version", on either backend:
// the watch as one ERROR event after 200 (as etcd3's watcher sends it),
// a list as the answer. (On the bbolt file the watch waited silently; on
// etcd it failed with "mvcc: required revision is a future revision".)
func TestFutureResourceVersion_Wire(t *testing.T) {
	l := newLab(t, nil)
	list, err := l.clientset("admin").CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	future := current + 1000

	code, body, _ := l.do("admin", "GET", fmt.Sprintf("/api/v1/namespaces/default/pods?watch=1&resourceVersion=%d&timeoutSeconds=5", future), "", nil)
	line, _, _ := bufio.NewReader(bytes.NewReader(body)).ReadLine()
	var ev struct {
		Type   string
		Object metav1.Status
	}
	if err := json.Unmarshal(line, &ev); code != 200 || err != nil || ev.Type != "ERROR" {
		t.Errorf("watch from revision %d: HTTP %d, first line %q (%v); want 200 and an ERROR event", future, code, line, err)
	} else {
		tooLarge(t, "the watch's ERROR event", ev.Object, future)
	}

	for _, q := range []string{"resourceVersion=%d", "resourceVersion=%d&resourceVersionMatch=NotOlderThan", "resourceVersion=%d&resourceVersionMatch=Exact"} {
		query := fmt.Sprintf(q, future)
		code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods?"+query, "", nil)
		if code != http.StatusGatewayTimeout {
			t.Errorf("list ?%s: HTTP %d, want 504", query, code)
		}
		tooLarge(t, "list ?"+query, status(t, body), future)
	}
}

// admitAll authenticates every request as an administrator: the same
// client reaches two API servers with token files of their own.
type admitAll struct{}

func (admitAll) AuthenticateRequest(*http.Request) (authn.User, bool, error) {
	return authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}, true, nil
}

// When the API server's store is switched under running components (a
// new store at a lower revision), their informers list again, as
// client-go's reflector does on 410 and on the 504 "Too large resource
// version", instead of exiting (the controller-manager and the scheduler
// exited with "mvcc: required revision is a future revision") or waiting
// forever for revisions the new store will not have soon.
func TestFutureResourceVersion_InformersListAgain(t *testing.T) {
	onEtcd := testenv.WantEtcd()
	one, two := newLabOn(t, onEtcd, nil), newLabOn(t, onEtcd, nil)
	var current atomic.Pointer[http.Handler]
	use := func(l *lab) {
		h := http.Handler(New(l.s, WithAuthenticator("any", admitAll{})))
		current.Store(&h)
	}
	use(one)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	cfg := &restclient.Config{Host: srv.URL, QPS: -1, TLSClientConfig: restclient.TLSClientConfig{CAData: certPEM(srv)}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rv := func(l *lab) int64 {
		list, err := l.clientset("admin").CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
		return n
	}
	// the first store ahead of the second
	if _, err := two.clientset("admin").CoreV1().Pods("default").Create(ctx(t), testPod("only-in-two"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; rv(one) <= rv(two)+5; i++ {
		if _, err := one.clientset("admin").CoreV1().Pods("default").Create(ctx(t), testPod(fmt.Sprintf("one-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// client-go's informer, as kube-scheduler's
	stop := make(chan struct{})
	defer close(stop)
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf := factory.Core().V1().Pods().Informer()
	factory.Start(stop)
	// podlab's own, as its scheduler's and controller-manager's
	rc, err := remote.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inf := apiserver.NewInformer(rc, "pods", "", apiserver.ListOptions{})
	runErr := make(chan error, 1)
	rctx := ctx(t)
	go func() { runErr <- inf.Run(rctx, nil) }()

	has := func(name string) (clientGo, podlab bool) {
		_, clientGo, _ = podInf.GetStore().GetByKey("default/" + name)
		_, podlab = inf.Get("default", name)
		return clientGo, podlab
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			select {
			case err := <-runErr:
				t.Fatalf("podlab's informer stopped (%s): %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				cg, pl := has("only-in-two")
				t.Fatalf("%s: not within 20 s (client-go's informer has only-in-two: %v, podlab's: %v)", what, cg, pl)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("both informers synced with the first store", func() bool { a, b := has("one-0"); return a && b })

	use(two)
	srv.CloseClientConnections() // the watches end; they resume against the second store
	waitFor("both informers listed the second store", func() bool {
		a, b := has("only-in-two")
		c, d := has("one-0")
		return a && b && !c && !d
	})
	select {
	case err := <-runErr:
		t.Fatalf("podlab's informer stopped: %v", err)
	default:
	}
}
