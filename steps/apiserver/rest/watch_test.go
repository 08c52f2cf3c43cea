package rest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/podlab/podlab/steps/store"
)

// next is the next event of a client-go watch.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return watch.Event{}
}

// A client-go watch from a list's resourceVersion sees every change after
// it, in order.
func TestWatch_ClientGo(t *testing.T) {
	l := newLab(t, nil)
	pods := l.clientset("admin").CoreV1().Pods("default")
	list, err := pods.List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx(t), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	p, err := pods.Create(ctx(t), testPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["v"] = "2"
	if _, err := pods.Update(ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx(t), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		ev := next(t, w)
		pod, ok := ev.Object.(*corev1.Pod)
		if ev.Type != want || !ok || pod.Name != "web" {
			t.Fatalf("event %s %T, want %s of pod web", ev.Type, ev.Object, want)
		}
	}
}

// A watch from a revision the store has compacted gets one ERROR event,
// a 410 Expired Status, as kube-apiserver sends it: client-go's reflector
// then lists again.
func TestWatch_CompactedRevisionIs410(t *testing.T) {
	l := newLab(t, []store.Option{store.WithHistory(5)})
	pods := l.clientset("admin").CoreV1().Pods("default")
	for i := range 10 {
		if _, err := pods.Create(ctx(t), testPod(fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := pods.Watch(ctx(t), metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatalf("Watch: %v (want the stream, then an ERROR event)", err)
	}
	defer w.Stop()
	ev := next(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		t.Fatalf("event %s %T, want ERROR with a Status", ev.Type, ev.Object)
	}
	err = apierrors.FromObject(st)
	if !apierrors.IsResourceExpired(err) || st.Code != http.StatusGone || !strings.Contains(st.Message, "too old resource version") {
		t.Errorf("Status %+v, want 410 Expired: too old resource version", st)
	}
}

// A client-go informer, as every controller runs one, syncs (asking for a
// WatchList first, as client-go v0.37 does) and then sees new objects.
func TestWatch_InformerSyncs(t *testing.T) {
	l := newLab(t, nil)
	cs := l.clientset("admin")
	if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	added := make(chan string, 10)
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added <- obj.(*corev1.Pod).Name }})
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	if !l.asked("sendInitialEvents=true") {
		t.Error("client-go did not ask for a WatchList (sendInitialEvents=true)")
	}
	if l.asked("GET /api/v1/pods?limit=") {
		t.Error("client-go fell back to list+watch: the WatchList did not satisfy it")
	}
	if got := <-added; got != "before" {
		t.Errorf("first added %q, want before", got)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-added:
		if got != "after" {
			t.Errorf("added %q, want after", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not see the new pod")
	}
}

// rawWatch opens a watch with curl's view of it: one JSON event a line.
func rawWatch(t *testing.T, l *lab, ctx context.Context, query string) (*bufio.Scanner, func()) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", l.srv.URL+"/api/v1/namespaces/default/pods?watch=true&"+query, nil)
	req.Header.Set("Authorization", "Bearer "+l.token("admin"))
	resp, err := l.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	return bufio.NewScanner(resp.Body), func() { resp.Body.Close() }
}

type rawEvent struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	} `json:"object"`
}

func readEvent(t *testing.T, sc *bufio.Scanner) rawEvent {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the stream ended: %v", sc.Err())
	}
	var ev rawEvent
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("not a watch event: %v\n%s", err, sc.Bytes())
	}
	return ev
}

// The wire: initial events and their bookmark, periodic bookmarks, and
// the end of the stream at timeoutSeconds.
func TestWatch_Wire(t *testing.T) {
	l := newLab(t, nil, WithBookmarkInterval(100*time.Millisecond))
	pods := l.clientset("admin").CoreV1().Pods("default")
	p, err := pods.Create(ctx(t), testPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("WatchList: ADDED for each object, then the initial-events-end bookmark", func(t *testing.T) {
		sc, done := rawWatch(t, l, ctx(t), "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		defer done()
		if ev := readEvent(t, sc); ev.Type != "ADDED" || ev.Object.Metadata.Name != "web" {
			t.Errorf("first event %+v, want ADDED web", ev)
		}
		ev := readEvent(t, sc)
		if ev.Type != "BOOKMARK" || ev.Object.Kind != "Pod" || ev.Object.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" || ev.Object.Metadata.ResourceVersion == "" {
			t.Errorf("second event %+v, want a Pod BOOKMARK annotated %s", ev, metav1.InitialEventsAnnotationKey)
		}
	})
	t.Run("bookmarks carry the last revision sent", func(t *testing.T) {
		sc, done := rawWatch(t, l, ctx(t), "allowWatchBookmarks=true&resourceVersion="+p.ResourceVersion)
		defer done()
		p2, err := pods.Create(ctx(t), testPod("second"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ev := readEvent(t, sc); ev.Type != "ADDED" || ev.Object.Metadata.Name != "second" {
			t.Errorf("event %+v, want ADDED second", ev)
		}
		if ev := readEvent(t, sc); ev.Type != "BOOKMARK" || ev.Object.Metadata.ResourceVersion != p2.ResourceVersion {
			t.Errorf("event %+v, want a BOOKMARK at %s", ev, p2.ResourceVersion)
		}
	})
	t.Run("sendInitialEvents without NotOlderThan is 422", func(t *testing.T) {
		code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true", "", nil)
		if st := status(t, body); code != 422 || st.Reason != metav1.StatusReasonInvalid {
			t.Errorf("%d %+v, want 422 Invalid", code, st)
		}
	})
	t.Run("timeoutSeconds ends the stream", func(t *testing.T) {
		start := time.Now()
		sc, done := rawWatch(t, l, ctx(t), "timeoutSeconds=1&resourceVersion="+p.ResourceVersion)
		defer done()
		for sc.Scan() {
		}
		if d := time.Since(start); d < time.Second || d > 5*time.Second {
			t.Errorf("the stream lasted %v, want about 1s", d)
		}
	})
}

// settledGoroutines is the number of goroutines once it has held still for
// half a second (at most 10 s): what the server starts in the background has
// started.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(10 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if g := runtime.NumGoroutine(); g == n {
			same++
		} else {
			n, same = g, 0
		}
	}
	return n
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// Watches whose clients go away cost nothing: 200 watches, each running
// (it has sent its first event, so the server holds a store watcher for
// it), dropped by cancelling the request or by closing the body, leave no
// goroutine and no file descriptor (store watchers use inotify) behind.
func TestWatch_DisconnectCostsNothing(t *testing.T) {
	l := newLab(t, nil)
	pods := l.clientset("admin").CoreV1().Pods("default")
	p, err := pods.Create(ctx(t), testPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.srv.Client().CloseIdleConnections()
	// on etcd the API server starts its RBAC policy watches in the
	// background, a moment after it opens: count once they run
	goroutines := settledGoroutines(t)
	fds := openFDs(t)
	const n = 200
	drops := make([]func(), 0, n)
	for i := range n {
		wctx, cancel := context.WithCancel(ctx(t))
		sc, closeBody := rawWatch(t, l, wctx, "resourceVersion=0")
		if ev := readEvent(t, sc); ev.Type != "ADDED" || ev.Object.Metadata.Name != p.Name {
			t.Fatalf("watch %d: first event %s %s", i, ev.Type, ev.Object.Metadata.Name)
		}
		if i%2 == 0 {
			drops = append(drops, func() { cancel() })
		} else {
			drops = append(drops, func() { closeBody(); cancel() })
		}
	}
	if g := runtime.NumGoroutine(); g < goroutines+n {
		t.Fatalf("%d goroutines with %d watches open, %d before: the watches are not running", g, n, goroutines)
	}
	for _, drop := range drops {
		drop()
	}
	if _, err := pods.Create(ctx(t), testPod("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		l.srv.Client().CloseIdleConnections()
		g, f := runtime.NumGoroutine(), openFDs(t)
		if g <= goroutines+2 && f <= fds+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("after %d watches came and went: %d goroutines (%d before), %d fds (%d before):\n%s",
				n, g, goroutines, f, fds, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An informer whose watch ends, and which comes back after the store has
// compacted past its resourceVersion, converges on what the API server
// holds: with WatchList (client-go v0.37's default) by asking for the
// initial events again; with list+watch by getting 410 Expired from its
// watch and listing again, as client-go does against kube-apiserver.
func TestWatch_InformerComesBack(t *testing.T) {
	tests := []struct {
		name      string
		watchList bool
		want      string // a request the informer must have made after coming back
		count     int    // how many times
	}{
		{"WatchList", true, "sendInitialEvents=true", 2},
		// the first list is "?limit=500&resourceVersion=0"; after the 410
		// the reflector lists at its last resourceVersion
		{"list+watch: 410, then list again", false, "GET /api/v1/pods?resourceVersion=", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, tt.watchList)
			l := newLab(t, []store.Option{store.WithHistory(5)})
			cs := l.clientset("admin")
			factory := informers.NewSharedInformerFactory(cs, 0)
			inf := factory.Core().V1().Pods().Informer()
			stop := make(chan struct{})
			defer func() { close(stop); factory.Shutdown() }()
			factory.Start(stop)
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
				t.Fatal("the informer never synced")
			}
			// the informer's watch ends (after an event: client-go takes a
			// watch that ends at once with nothing as an error, and lists),
			// and its next one waits while 20 pods are made: the history
			// keeps 5 events
			if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod("first"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextCancel(sctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
				return len(inf.GetStore().List()) == 1, nil
			}); err != nil {
				t.Fatal("the informer did not see the first pod")
			}
			release := l.holdWatches()
			l.endWatches()
			for i := range 20 {
				if _, err := cs.CoreV1().Pods("default").Create(ctx(t), testPod(fmt.Sprintf("p%02d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			release()
			err := wait.PollUntilContextCancel(sctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
				return len(inf.GetStore().List()) == 21, nil
			})
			if err != nil {
				t.Fatalf("the informer holds %d pods, want 21", len(inf.GetStore().List()))
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			n := 0
			for _, r := range l.requests {
				if strings.Contains(r, tt.want) {
					n++
				}
			}
			if n < tt.count {
				t.Errorf("%d requests with %q, want %d: %q", n, tt.want, tt.count, l.requests)
			}
		})
	}
}
