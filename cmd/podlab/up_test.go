package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

// upApp runs podlab with up, reset and exec in it (whether or not app.go
// lists them yet), with stdin as the terminal's input.
func upApp(t *testing.T, state, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(stdin), &out, &errOut)
	for _, cmd := range []*cli.Command{upCommand, resetCommand, execCommand, kubeletCommand, logsCommand} {
		if app.Command(cmd.Name) == nil {
			app.Commands = append(app.Commands, cmd)
		}
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func mustUpApp(t *testing.T, state, stdin string, args ...string) string {
	t.Helper()
	out, err := upApp(t, state, stdin, args...)
	if err != nil {
		t.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

var hello struct {
	once sync.Once
	img  v1.Image
	err  error
}

// demoImages writes podlab/hello:1.0, built in-process, into
// <state>/demo-images, where `make images` would put it: what podlab up's
// in-process registry serves. No network.
func demoImages(t *testing.T, state string) {
	t.Helper()
	hello.once.Do(func() {
		bin := filepath.Join(os.TempDir(), fmt.Sprintf("podlab-up-test-hello-%d", os.Getpid()))
		defer os.Remove(bin)
		if hello.err = images.BuildHello(context.Background(), testenv.RepoRoot(), bin); hello.err != nil {
			return
		}
		hello.img, hello.err = images.Hello(context.Background(), images.HelloOptions{Binary: bin})
	})
	if hello.err != nil {
		t.Fatalf("building the hello image: %v", hello.err)
	}
	if err := images.WriteLayout(context.Background(), registry.ImagesDir(state), []images.Named{{Ref: images.HelloRef, Image: hello.img}}); err != nil {
		t.Fatal(err)
	}
}

// upEnv is what up's tests need: the runtime, the test binary as the
// shim (see TestMain), no mirror (up serves the demo images itself).
func upEnv(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	t.Setenv("PODLAB_REGISTRY_MIRROR", "")
}

// checkSteps checks that out prints chain's steps in order, each numbered
// [N/len] and followed by the description's sentence, and no other step.
func checkSteps(t *testing.T, out string, chain []string) {
	t.Helper()
	pos := 0
	for i, sentence := range chain {
		head := fmt.Sprintf("[%d/%d] %s\n", i+1, len(chain), sentence)
		j := strings.Index(out[pos:], head)
		if j < 0 {
			t.Errorf("step %d is missing or out of order: %q", i+1, head)
			continue
		}
		pos += j + len(head)
		if !strings.HasPrefix(out[pos:], "   who  ") {
			t.Errorf("step %d does not say who did it:\n%s", i+1, out[pos:min(len(out), pos+200)])
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\[\d+/\d+\] `).FindAllString(out, -1)); n != len(chain) {
		t.Errorf("printed %d steps, want %d", n, len(chain))
	}
}

// TestUp_BarePod is issue 5's "done when" for up, exec and reset: podlab up
// on a fresh state directory prints the chain's 16 steps in order and ends
// with the pod Running and hello's greeting in its log; a second up says
// the pod exists; exec runs /hello in the container and returns its exit
// code; reset without --yes and the answer "n" removes nothing; reset
// --yes leaves no container, no mount, no cgroup of the pod, no store.
func TestUp_BarePod(t *testing.T) {
	upEnv(t)
	state := testenv.StateDir(t)
	demoImages(t, state)
	t.Cleanup(func() { upApp(t, state, "", "reset", "--yes") })

	out := mustUpApp(t, state, "", "up", "--name", "hello", "--image", "podlab/hello:1.0")
	t.Logf("podlab up:\n%s", out)
	checkSteps(t, out, up.PodChain[:])
	nodeDir := statedir.Layout{Dir: state}.Node("node-1").Dir
	for _, want := range []string{
		"podlab init: the state directory had no control plane",
		"the image registry: started in-process on http://127.0.0.1:",
		"kube-apiserver: serving the Kubernetes API in-process on https://127.0.0.1:",
		"storage               etcd (bbolt): created /registry/pods/default/hello at revision",
		"chose node node-1",
		"event ADDED pod default/hello at revision",
		"net  " + filepath.Join(nodeDir, "netns") + "/",
		"registry: ", "GET  /v2/podlab/hello/manifests/",
		"rootfs " + filepath.Join(nodeDir, "bundles") + "/",
		"CreateContainer: container ",
		"runc create (run by podlab's shim, pid ",
		"the pod's, pinned at " + filepath.Join(nodeDir, "netns"),
		"pivot_root into the bundle's rootfs",
		"pid 1 of its PID namespace",
		"/hello --listen :8080",
		"still running",
		"after StartContainer:  phase Running",
		"phase Pending -> Running",
		"GET http://127.0.0.1:8080/ from inside the pod's network namespace",
		"HTTP/1.1 200 OK",
		"| Hello from podlab/hello!",
		"|   hostname  hello",
		"the in-process registry on http://127.0.0.1:",
		// every component went through the API server over HTTPS, with
		// its own client certificate
		"requests over HTTPS on https://127.0.0.1:",
		"POST /api/v1/namespaces/default/pods (admin) 201 Created",
		"POST /api/v1/namespaces/default/pods/hello/binding (system:kube-scheduler) 201 Created",
		"/api/v1/namespaces/default/pods/hello/status (system:node:node-1) 200 OK",
		"podlab exec hello -- /hello --once",
		"podlab reset",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab up does not say %q", want)
		}
	}
	if get := mustPodlab(t, state, "get", "pod", "hello"); !strings.Contains(get, "Running") {
		t.Errorf("podlab get pod hello:\n%s", get)
	}
	logs := mustUpApp(t, state, "", "logs", "hello")
	if !strings.Contains(logs, "Hello from podlab/hello!") {
		t.Errorf("podlab logs hello:\n%s", logs)
	}

	again := mustUpApp(t, state, "", "up", "--name", "hello", "--image", "podlab/hello:1.0")
	if !strings.Contains(again, "pod default/hello exists already") || !strings.Contains(again, "Running on node-1") ||
		strings.Contains(again, "[1/16]") {
		t.Errorf("a second podlab up:\n%s", again)
	}

	// exec: /hello is the only program in the image.
	out = mustUpApp(t, state, "", "exec", "hello", "--", "/hello", "--once")
	if !strings.Contains(out, "Hello from podlab/hello!") || !strings.Contains(out, "hostname  hello") {
		t.Errorf("podlab exec hello -- /hello --once:\n%s", out)
	}
	out, err := upApp(t, state, "", "exec", "hello", "--", "/hello", "--no-such-flag")
	var coder cli.ExitCoder
	if !errors.As(err, &coder) || coder.ExitCode() != 1 || !strings.Contains(err.Error(), "command terminated with exit code 1") {
		t.Errorf("exec of a failing command: %v (want exit code 1)\n%s", err, out)
	}

	// The container, its mounts and its cgroup, before reset.
	id := containerOf(t, state, "hello")
	rt := runcState(t, state, id)
	pid := rt.Pid
	// The runtime's bundle, bundles/<sandbox-id>/<container-id>.
	bundles, _ := filepath.Glob(filepath.Join(nodeDir, "bundles", "*", id))
	if len(bundles) != 1 {
		t.Fatalf("the bundle of container %s: %v", id, bundles)
	}
	sandbox := filepath.Base(filepath.Dir(bundles[0]))
	mounts := mountsUnder(t, state)
	rootfs := filepath.Join(bundles[0], "rootfs")
	if pid <= 0 || len(mounts) != 4 || !slices.Contains(mounts, rootfs) {
		t.Fatalf("before reset: container pid %d, %d mounts (want 3 namespaces and the rootfs's overlay, %s): %v", pid, len(mounts), rootfs, mounts)
	}

	out = mustUpApp(t, state, "n\n", "reset")
	if !strings.Contains(out, "Remove everything under "+state+"? [y/N]") || !strings.Contains(out, "Nothing removed.") {
		t.Errorf("reset answered n:\n%s", out)
	}
	for _, p := range []string{"etcd/store.db", "auth/tokens.csv", "nodes/node-1/runc/" + id} {
		if _, err := os.Stat(filepath.Join(state, p)); err != nil {
			t.Errorf("after reset answered n: %s: %v", p, err)
		}
	}
	if unix.Kill(pid, 0) != nil {
		t.Errorf("after reset answered n, the container (pid %d) is gone", pid)
	}

	out = mustUpApp(t, state, "", "reset", "--yes")
	t.Logf("podlab reset --yes:\n%s", out)
	for _, want := range []string{"Deleted containers", id, "Unmounted:", filepath.Join(nodeDir, "netns", sandbox), "Removed cgroups: ", "Removed:", filepath.Join(state, "etcd"), "(kept: reset --all removes it too)"} {
		if !strings.Contains(out, want) {
			t.Errorf("reset --yes does not say %q", want)
		}
	}
	if err := unix.Kill(pid, 0); err == nil {
		t.Errorf("the container's process %d still runs after reset", pid)
	}
	if m := mountsUnder(t, state); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", state, m)
	}
	for _, h := range []string{"unified", "memory", "pids", "cpu"} {
		if d := filepath.Join("/sys/fs/cgroup", h, statedir.Layout{Dir: state}.CgroupRoot()); exists(d) {
			t.Errorf("cgroup %s is still there", d)
		}
	}
	if d := filepath.Join("/sys/fs/cgroup", statedir.Layout{Dir: state}.CgroupRoot()); exists(d) {
		t.Errorf("cgroup %s is still there", d)
	}
	for _, p := range []string{"etcd", "auth", "nodes", "registry", "content"} {
		if exists(filepath.Join(state, p)) {
			t.Errorf("%s is still there after reset --yes", p)
		}
	}
	if !exists(registry.ImagesDir(state)) {
		t.Errorf("the demo images were removed without --all")
	}
}

// TestUp_SecondUpRestartsTheRuntime: the runtime the first up started
// outlives it, configured with that up's in-process registry as its
// mirror, which stopped with it. A second up (another pod, an image not
// on the node yet) restarts the runtime with its own registry, and the
// pull, which goes through the runtime, works. Before, the second pull
// went to the first registry's dead port and the pod stayed in
// ErrImagePull.
func TestUp_SecondUpRestartsTheRuntime(t *testing.T) {
	upEnv(t)
	state := testenv.StateDir(t)
	demoImages(t, state)
	// A second tag of hello, so that the second pod's image is not on the
	// node yet (IfNotPresent pulls it).
	if err := images.WriteLayout(context.Background(), registry.ImagesDir(state), []images.Named{
		{Ref: images.HelloRef, Image: hello.img}, {Ref: "podlab/hello:2.0", Image: hello.img}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upApp(t, state, "", "reset", "--yes") })

	first := mustUpApp(t, state, "", "up", "--name", "one", "--image", "podlab/hello:1.0")
	if !strings.Contains(first, "the kubelet of node-1 started its container runtime") {
		t.Fatalf("the first up did not start the runtime:\n%s", first)
	}
	out := mustUpApp(t, state, "", "up", "--name", "two", "--image", "podlab/hello:2.0")
	t.Logf("the second podlab up:\n%s", out)
	for _, want := range []string{
		"the kubelet of node-1 restarted its container runtime",
		"pulls through the registry mirror http://127.0.0.1:",
		"PullImage podlab/hello:2.0 (imagePullPolicy IfNotPresent): pulled in ",
		"| Hello from podlab/hello!",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the second podlab up does not say %q", want)
		}
	}
}

// TestUp_Deployment: --deployment prints the chain's 18 steps, the
// controller-manager's among them, and ends with the Deployment's pod
// Running and the Deployment ready.
func TestUp_Deployment(t *testing.T) {
	upEnv(t)
	state := testenv.StateDir(t)
	demoImages(t, state)
	t.Cleanup(func() { upApp(t, state, "", "reset", "--yes") })

	out := mustUpApp(t, state, "", "up", "--deployment", "--image", "podlab/hello:1.0")
	t.Logf("podlab up --deployment:\n%s", out)
	checkSteps(t, out, up.DeploymentChain[:])
	for _, want := range []string{
		"kubectl create deployment web --image podlab/hello:1.0",
		"created /registry/deployments/default/web at revision",
		"deployment controller: the pod template hashes to",
		`"Adding deployment" logger="deployment-controller" deployment="default/web"`,
		"POST replicasets: /registry/replicasets/default/web-",
		"POST pods: /registry/pods/default/web-",
		"annotation deployment.kubernetes.io/revision=1",
		"pid 1 of its PID namespace",
		"| Hello from podlab/hello!",
		"deployment web: 1/1 ready",
		"podlab get replicasets",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab up --deployment does not say %q", want)
		}
	}
	pods := mustPodlab(t, state, "get", "pods")
	if !strings.Contains(pods, "web-") || !strings.Contains(pods, "Running") {
		t.Errorf("podlab get pods:\n%s", pods)
	}
	again := mustUpApp(t, state, "", "up", "--deployment")
	if !strings.Contains(again, "deployment default/web exists already") || !strings.Contains(again, "Running on node-1") {
		t.Errorf("a second podlab up --deployment:\n%s", again)
	}
}

// TestUp_ThroughARunningAPIServer: with podlab apiserver serving the state
// directory, up drives the chain through it (its store is not free, and
// its port is not the kubeconfigs' default), and says where the gate's
// phases are.
func TestUp_ThroughARunningAPIServer(t *testing.T) {
	upEnv(t)
	state := testenv.StateDir(t)
	demoImages(t, state)
	t.Cleanup(func() { upApp(t, state, "", "reset", "--yes") })
	port := freePort(t)
	mustPodlab(t, state, "init")
	srv, stderr := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})

	out := mustUpApp(t, state, "", "up", "--name", "hello", "--image", "podlab/hello:1.0")
	t.Logf("podlab up:\n%s", out)
	checkSteps(t, out, up.PodChain[:])
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	for _, want := range []string{
		fmt.Sprintf("kube-apiserver: podlab apiserver (pid %d) serves this state directory on %s", srv.Process.Pid, url),
		"POST " + url + "/api/v1/namespaces/default/pods, over HTTPS with admin's client certificate",
		fmt.Sprintf("the gate ran in podlab apiserver (pid %d): its phases are in its log (podlab apiserver -v)", srv.Process.Pid),
		"pid 1 of its PID namespace",
		"| Hello from podlab/hello!",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab up does not say %q", want)
		}
	}
	if strings.Contains(out, "the in-process kube-apiserver") {
		t.Errorf("podlab up ran its own API server next to podlab apiserver:\n%s", out)
	}
	if srv.ProcessState != nil {
		t.Fatalf("podlab apiserver ended: %s", stderr.String())
	}
}

// TestUp_BadInputs: each fails with a clear error, before anything runs.
func TestUp_BadInputs(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	mustPodlab(t, state, "run", "pending", "--image", "nginx")
	notPodlab := t.TempDir()
	t.Setenv("PODLAB_RUNTIME", "/bin/true") // never run: every case fails before
	t.Setenv("PODLAB_REGISTRY_MIRROR", "")
	tests := []struct {
		name  string
		state string
		args  []string
		want  string
	}{
		{"up with an argument", state, []string{"up", "web"}, "up takes no arguments"},
		{"up with a bad name", state, []string{"up", "--name", "Web_1"}, `name "Web_1"`},
		{"up without demo images or a mirror", state, []string{"up"}, "no demo images to serve: " + registry.ImagesDir(state) + " does not exist: run `make images`"},
		{"reset of a directory that is not podlab's", notPodlab, []string{"reset", "--yes"}, "not a podlab state directory"},
		{"reset with an argument", state, []string{"reset", "/"}, "reset takes no arguments"},
		{"exec without a pod", state, []string{"exec"}, "exec needs a pod"},
		{"exec without a command", state, []string{"exec", "web"}, "exec needs a command after --"},
		{"exec in a missing pod", state, []string{"exec", "nope", "--", "ls"}, `pods "nope" not found`},
		{"exec in a pod with no node", state, []string{"exec", "pending", "--", "ls"}, "pod pending is not scheduled to a node yet"},
		{"exec as viewer", state, []string{"exec", "pending", "--as", "viewer", "--", "ls"}, `cannot create resource "pods/exec"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := upApp(t, tt.state, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("podlab %s: %v, want an error containing %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
			}
		})
	}
	// The refused reset removed nothing.
	if !exists(filepath.Join(state, "etcd")) {
		t.Errorf("a failed command removed the store")
	}
}

// containerOf is the runtime container ID of pod's first container, from
// its status.
func containerOf(t *testing.T, state, pod string) string {
	t.Helper()
	yaml := mustPodlab(t, state, "get", "pod", pod, "-o", "yaml")
	m := regexp.MustCompile(`containerID: podlab://(\S+)`).FindStringSubmatch(yaml)
	if m == nil {
		t.Fatalf("no containerID in pod %s:\n%s", pod, yaml)
	}
	return m[1]
}

type containerState struct{ Pid int }

// runcState reads the container's pid from runc's state.json.
func runcState(t *testing.T, state, id string) containerState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(statedir.Layout{Dir: state}.Node("node-1").Dir, "runc", id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"init_process_pid":(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no init_process_pid in state.json of %s", id)
	}
	var pid int
	fmt.Sscan(string(m[1]), &pid)
	return containerState{Pid: pid}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
