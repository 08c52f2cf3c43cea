package kubelet_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// TestSandbox_SharedNamespaces: a pod's two containers share the
// sandbox's network and UTS namespaces (not their PID namespaces), and
// the pod's localhost serves: lo is up.
func TestSandbox_SharedNamespaces(t *testing.T) {
	c := newCluster(t)
	p := helloPod(t, "pair")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: helloRef(t), Args: []string{"--listen", ":8081"}})
	pod := c.create(t, p)
	c.syncUntil(t, "pair", 10*time.Second, "Running", running)

	sb := c.sandboxOf(t, pod.UID)
	nsOf := func(pid int, kind string) string {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	pinned := func(kind string) string {
		var st unix.Stat_t
		if err := unix.Stat(sb.Info.Namespaces[kind], &st); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s:[%d]", kind, st.Ino)
	}
	var pids []int
	got := c.get(t, "pair")
	for _, name := range []string{"web", "side"} {
		pids = append(pids, c.inspectContainer(t, got, name).Info.Pid)
	}
	for _, kind := range []string{"net", "uts", "ipc"} {
		a, b := nsOf(pids[0], kind), nsOf(pids[1], kind)
		if a != b || a != pinned(kind) {
			t.Errorf("%s namespace: web %s, side %s, the sandbox's %s", kind, a, b, pinned(kind))
		}
		if host := nsOf(os.Getpid(), kind); a == host {
			t.Errorf("the pod shares the host's %s namespace", kind)
		}
	}
	if nsOf(pids[0], "pid") == nsOf(pids[1], "pid") {
		t.Errorf("the containers share a pid namespace; each should have its own")
	}

	// In the pod's network namespace, localhost reaches both containers.
	for _, port := range []string{"8080", "8081"} {
		var body string
		deadline := time.Now().Add(5 * time.Second)
		for {
			var err error
			if body, err = getInNetns(sb.Info.Namespaces["net"], "127.0.0.1:"+port); err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Fatalf("GET http://127.0.0.1:%s/ in the pod: %v", port, err)
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(body, "Hello from podlab/hello!") || !strings.Contains(body, "hostname  pair") {
			t.Errorf("port %s answered:\n%s", port, body)
		}
	}
}

// getInNetns makes an HTTP GET from inside the network namespace pinned at
// path: the socket is created in a thread that joined it.
func getInNetns(path, addr string) (string, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		ch <- result{conn, err}
	}()
	r := <-ch
	if r.err != nil {
		return "", r.err
	}
	defer r.conn.Close()
	r.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(r.conn, "GET / HTTP/1.0\r\nHost: pod\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(r.conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String(), nil
}

// TestKubelet_TwoNodes: two kubelets on this machine, each with its own
// node directory; each runs only the pods bound to it.
func TestKubelet_TwoNodes(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	if _, err := apiserver.AddNodeUser(c.dir, "node-2"); err != nil {
		t.Fatal(err)
	}
	// The token file changed: open the server again to read it.
	srv, err := apiserver.Open(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := srv.ClientAs("system:node:node-2")
	if err != nil {
		t.Fatal(err)
	}
	cri2 := serveRuntimeOf(t, c.dir, "node-2", c.kubeletRuntime())
	k2, err := kubelet.New(kubelet.Config{Node: "node-2", StateDir: c.dir, Client: client, CRI: cri2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.admin.Delete(context.Background(), "pods", "default", "there", apiserver.DeleteOptions{Force: true})
		if err := k2.CleanupOrphans(context.Background()); err != nil {
			t.Errorf("cleaning up node-2: %v", err)
		}
	})

	p := helloPod(t, "there")
	obj, err := c.admin.Create(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.admin.Bind(ctx, &corev1.Binding{ObjectMeta: obj.(*corev1.Pod).ObjectMeta,
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}); err != nil {
		t.Fatal(err)
	}
	pod := c.get(t, "there")
	if _, err := c.kubelet.PullStage(ctx, pod, ""); err == nil {
		t.Errorf("node-1's kubelet worked on node-2's pod")
	}
	if err := k2.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.get(t, "there"); got.Status.Phase != corev1.PodRunning {
		t.Fatalf("on node-2:\n%s", statusText(got))
	}
	if k2.Layout().Dir == c.kubelet.Layout().Dir {
		t.Fatalf("both nodes use %s", k2.Layout().Dir)
	}
	// node-2's runtime has the pod, its files under node-2's directory;
	// node-1's runtime has nothing of it.
	if len(c.containersOf(t, pod.UID)) != 0 || len(c.sandboxesOf(t, pod.UID)) != 0 {
		t.Errorf("node-1's runtime has containers or sandboxes of node-2's pod")
	}
	c2 := &cluster{cri: cri2}
	in := c2.inspectContainer(t, c.get(t, "there"), "web")
	if !strings.HasPrefix(in.Info.Bundle, k2.Layout().Dir+"/") {
		t.Errorf("node-2's bundle %s is not under %s", in.Info.Bundle, k2.Layout().Dir)
	}
	var out strings.Builder
	src, err := kubelet.Logs(ctx, c.dir, c.get(t, "there"), &out, kubelet.LogsOptions{})
	if err != nil || src.Node != "node-2" || !strings.HasPrefix(src.Path, k2.Layout().Dir) {
		t.Errorf("logs of node-2's pod: %+v, %v", src, err)
	}
}

// TestSandbox_HostNetwork: a hostNetwork pod uses the node's network and
// UTS namespaces; only its IPC namespace is its own.
func TestSandbox_HostNetwork(t *testing.T) {
	c := newCluster(t)
	p := helloPod(t, "hostnet", "--once")
	p.Spec.HostNetwork = true
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod := c.create(t, p)
	got := c.syncUntil(t, "hostnet", 10*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	sb := c.sandboxOf(t, pod.UID)
	if o := sb.Status.GetLinux().GetNamespaces().GetOptions(); o.GetNetwork() != runtimeapi.NamespaceMode_NODE || o.GetIpc() != runtimeapi.NamespaceMode_POD {
		t.Errorf("the sandbox's namespace options: %v, want network NODE, ipc POD", o)
	}
	for kind, want := range map[string]bool{"net": false, "uts": false, "ipc": true} {
		if _, ok := sb.Info.Namespaces[kind]; ok != want {
			t.Errorf("%s namespace pinned: %v, want %v (%v)", kind, ok, want, sb.Info.Namespaces)
		}
	}
	if got.Status.PodIP == "" || got.Status.PodIP != got.Status.HostIP {
		t.Errorf("a hostNetwork pod's IP is its node's: podIP %q, hostIP %q", got.Status.PodIP, got.Status.HostIP)
	}
	host, _ := os.Hostname()
	var out strings.Builder
	if _, err := kubelet.Logs(context.Background(), c.dir, got, &out, kubelet.LogsOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hostname  "+host) {
		t.Errorf("a hostNetwork pod should see the node's hostname %q:\n%s", host, out.String())
	}
}
