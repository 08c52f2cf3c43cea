package bench

// The kubelet's target: a pod created through the API server reaches
// Running in under 300 ms when its image is already in the runtime's
// content store, split by stage; every kubelet stage is a CRI client of
// the node's runtime (steps/cri, served in this process on the node's
// socket: gRPC over the unix socket):
//
//	API create   the pod through the gate into the store (as admin)
//	bind         the scheduler's Binding (as system:kube-scheduler)
//	sandbox      the pod cgroup, then RunPodSandbox: namespaces pinned
//	pull-check   imagePullPolicy IfNotPresent: ImageStatus has the image
//	create       the ContainerConfig, then CreateContainer: the runtime
//	             unpacks the layers, writes config.json, runs runc create
//	start        StartContainer: runc start
//	status       the kubelet's status updates and Events, all stages together
//
// Each kubelet stage is its exported method, which the sync loop calls; the
// time each spent writing status and Events is taken out of it and counted
// under "status". The same path through the sync loop (the informer's
// watch, the pod worker), from create to a watcher seeing Running, is
// held to the same target.

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/internal/testenv/noderuntime"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/statedir"
)

const (
	startupRounds = 15
	startupTarget = 300 * time.Millisecond
)

var startupStages = []string{"API create", "bind", "sandbox", "pull-check", "create", "start", "status"}

// startupFixture is an API server, node-1's kubelet with the hello image
// already pulled, and the clients of the other components.
type startupFixture struct {
	ref          string
	admin, sched apiserver.Interface
	kubelet      *kubelet.Kubelet
	cfg          kubelet.Config
}

func setupStartup(b *testing.B) *startupFixture { return setupStartupWith(b, false) }

// setupStartupWith is setupStartup, with every component a client of an
// HTTPS API server (package remote, the lab's kubeconfigs) if network.
func setupStartupWith(b *testing.B, network bool) *startupFixture {
	b.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root, for runc and the pod sandbox")
	}
	podlab := filepath.Join(testenv.RepoRoot(), "bin", "podlab")
	if _, err := os.Stat(podlab); err != nil {
		testenv.Missing(b, "bin/podlab, the kubelet's shim (run make build)")
	}
	ctx := context.Background()
	tmp := b.TempDir()
	helloBin := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		b.Fatal(err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	b.Cleanup(srv.Close)
	f := &startupFixture{ref: strings.TrimPrefix(srv.URL, "http://") + "/" + images.HelloRef}
	r, err := name.ParseReference(f.ref)
	if err != nil {
		b.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		b.Fatal(err)
	}

	dir := filepath.Join(diskDir(b), "state")
	var node apiserver.Interface
	if network {
		l := startNetLab(b, dir)
		f.admin, f.sched, node = l.remote(b, "admin"), l.remote(b, "kube-scheduler"), l.remote(b, apiserver.HostNode)
	} else {
		s, admin := initServer(b, dir)
		f.admin = admin
		if f.sched, err = s.ClientAs("system:kube-scheduler"); err != nil {
			b.Fatal(err)
		}
		if node, err = s.ClientAs("system:node:" + apiserver.HostNode); err != nil {
			b.Fatal(err)
		}
	}
	f.cfg = kubelet.Config{StateDir: dir, Client: node,
		CRI: noderuntime.Serve(b, statedir.Layout{Dir: dir}.Node(apiserver.HostNode), testenv.Runc(b), []string{podlab, "runc", "shim"})}
	if f.kubelet, err = kubelet.New(f.cfg); err != nil {
		b.Fatal(err)
	}
	if _, err := f.kubelet.Register(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := f.kubelet.CleanupOrphans(context.Background()); err != nil {
			b.Errorf("cleaning up the node: %v", err)
		}
	})
	// Pull the image once: the pods measured find it cached.
	warm := f.createAndBind(b, "warm-up")
	if err := f.kubelet.SyncPod(ctx, warm); err != nil {
		b.Fatal(err)
	}
	f.remove(b, "warm-up")
	return f
}

func (f *startupFixture) pod(name string) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "web", Image: f.ref}}},
	}
}

func (f *startupFixture) bind(ctx context.Context, name string) error {
	return f.sched.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Target: corev1.ObjectReference{Kind: "Node", Name: apiserver.HostNode}})
}

func (f *startupFixture) createAndBind(b *testing.B, name string) *corev1.Pod {
	ctx := context.Background()
	if _, err := f.admin.Create(ctx, f.pod(name)); err != nil {
		b.Fatal(err)
	}
	if err := f.bind(ctx, name); err != nil {
		b.Fatal(err)
	}
	p, err := f.kubelet.Pod(ctx, "default", name)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// remove deletes a pod the way it goes in Kubernetes: marked, stopped and
// removed by its kubelet.
func (f *startupFixture) remove(b *testing.B, name string) {
	ctx := context.Background()
	if _, err := f.admin.Delete(ctx, "pods", "default", name, apiserver.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	p, err := f.kubelet.Pod(ctx, "default", name)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.kubelet.SyncPod(ctx, p); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPodStartup(b *testing.B) {
	f := setupStartup(b)
	ctx := context.Background()
	times := map[string][]time.Duration{}
	var totals []time.Duration
	for i := 0; i < startupRounds; i++ {
		name := fmt.Sprintf("web-%d", i)
		round := map[string]time.Duration{}
		start := time.Now()
		if _, err := f.admin.Create(ctx, f.pod(name)); err != nil {
			b.Fatal(err)
		}
		round["API create"] = time.Since(start)
		t := time.Now()
		if err := f.bind(ctx, name); err != nil {
			b.Fatal(err)
		}
		round["bind"] = time.Since(t)
		pod, err := f.kubelet.Pod(ctx, "default", name) // what the kubelet's watch delivers
		if err != nil {
			b.Fatal(err)
		}
		stage := func(what string, took time.Duration, rec kubelet.Recording, err error) {
			if err != nil {
				b.Fatalf("%s: %v", what, err)
			}
			round[what] += took - rec.Took
			round["status"] += rec.Took
		}
		// Each stage gets the pod as the kubelet's watch delivers it after
		// the stage before (its status says what was done: the pull for
		// this run), as the sync loop's pod worker does.
		latest := func() *corev1.Pod {
			p, err := f.kubelet.Pod(ctx, "default", name)
			if err != nil {
				b.Fatal(err)
			}
			return p
		}
		sb, err := f.kubelet.SandboxStage(ctx, pod)
		mustStage(b, "sandbox", sb, err)
		stage("sandbox", sb.Took, sb.Recording, err)
		pr, err := f.kubelet.PullStage(ctx, latest(), "web")
		mustStage(b, "pull-check", pr, err)
		stage("pull-check", pr.Took, pr.Recording, err)
		if pr.Pulled {
			b.Fatalf("the image was pulled again; it should be cached")
		}
		cr, err := f.kubelet.CreateStage(ctx, latest(), "web")
		mustStage(b, "create", cr, err)
		stage("create", cr.Took, cr.Recording, err)
		st, err := f.kubelet.StartStage(ctx, latest(), "web")
		mustStage(b, "start", st, err)
		stage("start", st.Took, st.Recording, err)
		total := time.Since(start)
		if st.Phase != corev1.PodRunning {
			b.Fatalf("pod %s is %s after its start, want Running", name, st.Phase)
		}
		for k, v := range round {
			times[k] = append(times[k], v)
		}
		totals = append(totals, total)
		f.remove(b, name)
	}

	fmt.Printf("pod startup, create to Running with a cached image (median of %d rounds):\n", startupRounds)
	for _, s := range startupStages {
		fmt.Printf("  %-12s %7.1f ms\n", s, ms(medianDuration(times[s])))
	}
	total := medianDuration(totals)
	verdict := "ok"
	if total >= startupTarget {
		verdict = "MISSED"
		b.Errorf("pod startup took %v (median), target under %v", total, startupTarget)
	}
	fmt.Printf("  %-12s %7.1f ms  (target < %d ms) %s\n", "total", ms(total), startupTarget.Milliseconds(), verdict)
	b.ReportMetric(ms(total), "startup-ms")

	loop := syncLoopStartup(b, f)
	verdict = "ok"
	if loop >= startupTarget {
		verdict = "MISSED"
		b.Errorf("pod startup through the sync loop took %v (median), target under %v", loop, startupTarget)
	}
	fmt.Printf("  %-12s %7.1f ms  (the same through the sync loop: watch, pod worker, every stage; target < %d ms) %s\n",
		"sync loop", ms(loop), startupTarget.Milliseconds(), verdict)
	b.ReportMetric(ms(loop), "startup-loop-ms")
}

// syncLoopStartup runs the kubelet's sync loop and times pods from create
// to Running as a watcher of the API server sees it.
func syncLoopStartup(b *testing.B, f *startupFixture) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.kubelet.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("the sync loop: %v", err)
		}
	}()
	var times []time.Duration
	for i := 0; i < startupRounds; i++ {
		name := fmt.Sprintf("loop-%d", i)
		list, err := f.admin.List(ctx, "pods", "default", apiserver.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		w, err := f.admin.Watch(wctx, "pods", "default", apiserver.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=" + name})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := f.admin.Create(ctx, f.pod(name)); err != nil {
			b.Fatal(err)
		}
		if err := f.bind(ctx, name); err != nil {
			b.Fatal(err)
		}
		var took time.Duration
		for ev := range w.Events() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
				took = time.Since(start)
				break
			}
		}
		wcancel()
		if took == 0 {
			b.Fatalf("pod %s never reached Running through the sync loop", name)
		}
		times = append(times, took)
		if _, err := f.admin.Delete(ctx, "pods", "default", name, apiserver.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := f.admin.Get(ctx, "pods", "default", name); err != nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pod %s was not removed by the sync loop", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return medianDuration(times)
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// mustStage stops the benchmark at a stage that failed (its result may be
// nil then).
func mustStage[T any](b *testing.B, what string, res *T, err error) {
	b.Helper()
	if err != nil || res == nil {
		b.Fatalf("%s: %v", what, err)
	}
}
