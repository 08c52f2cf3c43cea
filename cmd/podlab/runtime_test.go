package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/internal/testenv/demoregistry"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

// demoRegistry is an in-process registry holding the demo images of
// /var/lib/podlab/demo-images (make images), as HOST/podlab/hello:1.0 and
// HOST/library/nginx:latest.
func demoRegistry(t *testing.T) string { return demoregistry.Serve(t) }

// crictl drives node-1's podlab runtime with the real crictl.
type crictlRunner struct {
	t    *testing.T
	bin  string
	sock string
	home string
}

func (c crictlRunner) run(args ...string) (string, error) {
	c.t.Helper()
	full := append([]string{"--config", filepath.Join(c.home, "crictl.yaml"), "--runtime-endpoint", "unix://" + c.sock,
		"--image-endpoint", "unix://" + c.sock, "--timeout", "60s"}, args...)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+c.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c crictlRunner) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestRuntime_Crictl walks a pod by hand with crictl against `podlab
// runtime`, as lesson 17 does: pull, images, runp, create, start, pods,
// ps -a, logs, exec, inspect, inspectp, stop, rm, stopp, rmp.
func TestRuntime_Crictl(t *testing.T) {
	testenv.RequireRoot(t)
	crictlBin := testenv.LookPath(t, "crictl")
	host := demoRegistry(t)
	state := testenv.StateDir(t)
	_, out := startComponent(t, state, "runtime", "--node", "node-1", "-v", "--insecure")
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	sock := l.Node("node-1").CRISocket()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "crictl --runtime-endpoint unix://"+sock+" pods") {
		if time.Now().After(deadline) {
			t.Fatalf("podlab runtime did not say it serves %s:\n%s", sock, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := crictlRunner{t: t, bin: crictlBin, sock: sock, home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.home, "crictl.yaml"), []byte("runtime-endpoint: unix://"+sock+"\nimage-endpoint: unix://"+sock+"\ntimeout: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := host + "/podlab/hello:1.0"
	// A failing test leaves no pod running (cleanups run last first: this
	// one before the runtime stops).
	t.Cleanup(func() { c.run("rmp", "--all", "--force") })

	if got := c.must("pull", ref); !strings.Contains(got, "Image is up to date for sha256:") {
		t.Fatalf("crictl pull: %s", got)
	}
	if got := c.must("images"); !strings.Contains(got, host+"/podlab/hello") || !strings.Contains(got, "1.0") {
		t.Fatalf("crictl images:\n%s", got)
	}
	if got := c.must("imagefsinfo"); !strings.Contains(got, l.Node("node-1").ContentDir()) {
		t.Fatalf("crictl imagefsinfo:\n%s", got)
	}
	// No pod CIDR yet: the network is not ready, and Status says why.
	if got := c.must("info"); !strings.Contains(got, "NetworkPluginNotReady") || !strings.Contains(got, l.Node("node-1").CNIConfDir()) {
		t.Fatalf("crictl info:\n%s", got)
	}
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod-config.json")
	ctr := filepath.Join(dir, "container-config.json")
	writeJSON(t, pod, map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "web-uid-1"},
		"hostname": "web", "log_directory": filepath.Join(dir, "logs")})
	writeJSON(t, ctr, map[string]any{"metadata": map[string]any{"name": "hello"}, "image": map[string]any{"image": ref},
		"log_path": "hello/0.log", "envs": []map[string]any{{"key": "GREETING", "value": "Hello from crictl"}}})
	podID := strings.TrimSpace(c.must("runp", pod))
	if len(podID) != 64 {
		t.Fatalf("crictl runp answered %q, want a 64-hex sandbox id", podID)
	}
	cid := strings.TrimSpace(c.must("create", podID, ctr, pod))
	if len(cid) != 64 {
		t.Fatalf("crictl create answered %q, want a 64-hex container id", cid)
	}
	c.must("start", cid)
	if got := c.must("pods"); !strings.Contains(got, podID[:13]) || !strings.Contains(got, "Ready") || !strings.Contains(got, "web") {
		t.Fatalf("crictl pods:\n%s", got)
	}
	if got := c.must("ps", "-a"); !strings.Contains(got, cid[:13]) || !strings.Contains(got, "Running") || !strings.Contains(got, "hello") {
		t.Fatalf("crictl ps -a:\n%s", got)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		got := c.must("logs", cid[:13])
		if strings.Contains(got, "Hello from crictl") {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("crictl logs has no greeting:\n%s", got)
		}
	}
	if got := c.must("exec", cid[:13], "/hello", "--once"); !strings.Contains(got, "web") || !strings.Contains(got, "Hello from crictl") {
		t.Fatalf("crictl exec /hello --once:\n%s", got)
	}
	// On a terminal the runtime holds (a pseudo-terminal): lines end in \r\n.
	if got := c.onTerminal("exec", "-it", cid[:13], "/hello", "--once"); !strings.Contains(got, "Hello from crictl!\r\n") {
		t.Fatalf("crictl exec -it /hello --once: %q", got)
	}
	if got := c.must("exec", "-s", cid[:13], "/hello", "--once"); !strings.Contains(got, "Hello from crictl") {
		t.Fatalf("crictl exec -s /hello --once:\n%s", got)
	}
	var inspect struct {
		Status struct{ State, LogPath string }
		Info   struct {
			Bundle string
			Pid    int
		}
	}
	if err := json.Unmarshal([]byte(c.must("inspect", cid)), &inspect); err != nil {
		t.Fatal(err)
	}
	if inspect.Status.State != "CONTAINER_RUNNING" || inspect.Info.Pid == 0 || !strings.HasPrefix(inspect.Info.Bundle, l.Node("node-1").BundlesDir()) {
		t.Fatalf("crictl inspect: %+v", inspect)
	}
	var inspectp struct{ Status struct{ State string } }
	if err := json.Unmarshal([]byte(c.must("inspectp", podID)), &inspectp); err != nil || inspectp.Status.State != "SANDBOX_READY" {
		t.Fatalf("crictl inspectp: %+v %v", inspectp, err)
	}
	// UpdateContainerResources: the hello greeting reads its memory limit.
	c.must("update", "--memory", "67108864", cid)
	if got := c.must("exec", cid, "/hello", "--once"); !strings.Contains(got, "67108864") && !strings.Contains(got, "64 MiB") {
		t.Fatalf("crictl exec after crictl update --memory 64Mi:\n%s", got)
	}
	// Stats, of the container and of the pod.
	if got := c.must("stats", "-a"); !strings.Contains(got, cid[:13]) {
		t.Fatalf("crictl stats:\n%s", got)
	}
	if got := c.must("statsp"); !strings.Contains(got, "web") {
		t.Fatalf("crictl statsp:\n%s", got)
	}
	// PortForward through the streaming server into the pod's network
	// namespace, where hello serves :8080.
	port := freeLocalPort(t)
	pf := exec.Command(c.bin, "--config", filepath.Join(c.home, "crictl.yaml"), "port-forward", podID, fmt.Sprintf("%d:8080", port))
	pfOut := &lockedBuffer{}
	pf.Stdout, pf.Stderr = pfOut, pfOut
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	body := ""
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
	}
	pf.Process.Kill()
	pf.Wait()
	if !strings.Contains(body, "Hello from crictl") {
		t.Fatalf("crictl port-forward %d:8080: got %q\n%s", port, body, pfOut.String())
	}

	// attach -i: a container made with stdin (and stdin_once) reads what
	// crictl's stdin sends; at its end the container's stdin closes, cat
	// exits, and so does the attach. cat and its libraries are the node's
	// (/usr, mounted read-only): the hello image has only /hello.
	catCfg := filepath.Join(dir, "cat-config.json")
	var mounts []map[string]any
	for host, ctr := range map[string]string{"/usr": "/usr", "/usr/lib": "/lib", "/usr/lib64": "/lib64"} {
		mounts = append(mounts, map[string]any{"host_path": host, "container_path": ctr, "readonly": true})
	}
	writeJSON(t, catCfg, map[string]any{"metadata": map[string]any{"name": "cat"}, "image": map[string]any{"image": ref},
		"log_path": "cat/0.log", "command": []string{"/usr/bin/cat"}, "stdin": true, "stdin_once": true, "mounts": mounts})
	catID := strings.TrimSpace(c.must("create", podID, catCfg, pod))
	c.must("start", catID)
	att := exec.Command(c.bin, "--config", filepath.Join(c.home, "crictl.yaml"), "attach", "-i", catID)
	att.Stdin = strings.NewReader("a line through crictl attach -i\n")
	attDone := make(chan struct{})
	var attOut []byte
	go func() { attOut, err = att.CombinedOutput(); close(attDone) }()
	select {
	case <-attDone:
	case <-time.After(20 * time.Second):
		att.Process.Kill()
		<-attDone
	}
	if err != nil || string(attOut) != "a line through crictl attach -i\n" {
		t.Fatalf("crictl attach -i %s: %v: %q, want cat's echo of the line", catID, err, attOut)
	}
	if got := c.must("ps", "-a", "--name", "^cat$"); !strings.Contains(got, "Exited") {
		t.Fatalf("crictl ps -a after cat's stdin closed:\n%s", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "cat", "0.log")); err != nil || !strings.Contains(string(b), " stdout F a line through crictl attach -i\n") {
		t.Fatalf("cat's log: %q %v", b, err)
	}
	c.must("rm", catID)

	c.must("stop", cid)
	if got := c.must("ps", "-a"); !strings.Contains(got, "Exited") {
		t.Fatalf("crictl ps -a after stop:\n%s", got)
	}
	c.must("rm", cid)
	c.must("stopp", podID)
	c.must("rmp", podID)
	if got := c.must("pods", "-q"); strings.TrimSpace(got) != "" {
		t.Fatalf("crictl pods after rmp: %q", got)
	}
	c.must("rmi", ref)
	if got := c.must("images", "-q"); strings.TrimSpace(got) != "" {
		t.Fatalf("crictl images after rmi: %q", got)
	}
	// The -v narration showed each call with its request and response.
	for _, want := range []string{"RunPodSandbox request: {config:{metadata:{name:\"web\"", "CreateContainer response", "RemovePodSandbox response"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("podlab runtime -v did not print %q", want)
		}
	}
	// Unknown IDs: NotFound, naming the ID.
	if got, err := c.run("inspect", "0123456789abc"); err == nil || !strings.Contains(got, "0123456789abc") || !strings.Contains(got, "NotFound") {
		t.Fatalf("crictl inspect of an unknown id: %v\n%s", err, got)
	}
}

// A second runtime on the same node is refused, naming the first; a path
// that is not a socket is refused and left as it was.
func TestRuntime_BadSockets(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	sock := l.Node("node-2").CRISocket()
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = podlab(t, state, "runtime", "--node", "node-2")
	if err == nil || !strings.Contains(err.Error(), "is a regular file of 12 bytes") {
		t.Fatalf("podlab runtime on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "not a socket" {
		t.Fatalf("the file changed: %q", b)
	}

	_, out := startComponent(t, state, "runtime", "--node", "node-1")
	first := l.Node("node-1").CRISocket()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "Ctrl-C stops"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first runtime did not start:\n%s", out.String())
		}
	}
	_, _, err = podlab(t, state, "runtime", "--node", "node-1")
	if err == nil || !strings.Contains(err.Error(), "another runtime is serving the CRI socket "+first) || !strings.Contains(err.Error(), "podlab ") {
		t.Fatalf("a second podlab runtime: %v", err)
	}
}

// onTerminal runs crictl on a pseudo-terminal of the test's, as a
// learner's shell runs it, and returns what it wrote there.
func (c crictlRunner) onTerminal(args ...string) string {
	c.t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer leader.Close()
	if err := unix.IoctlSetPointerInt(int(leader.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		c.t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(leader.Fd()), unix.TIOCGPTN)
	if err != nil {
		c.t.Fatal(err)
	}
	follower, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, append([]string{"--config", filepath.Join(c.home, "crictl.yaml")}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = follower, follower, follower
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	follower.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, leader) // until EIO: nobody holds the terminal
	if err := cmd.Wait(); err != nil {
		c.t.Fatalf("crictl %s on a terminal: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func freeLocalPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The runtime is killed (SIGKILL) at random moments inside RunPodSandbox
// and CreateContainer (after its record says "creating", checked with the
// runtime stopped); each restart cleans what the killed create made, and
// says so, so nothing is left that no record names: no bundle, runc
// container, shim directory, cgroup, namespace or overlay probe mount, and
// no record still "creating".
func TestRuntime_KilledMidCreate(t *testing.T) {
	testenv.RequireRoot(t)
	crictlBin := testenv.LookPath(t, "crictl")
	host := demoRegistry(t)
	state := testenv.StateDir(t)
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	n := l.Node("node-1")
	start := func() (*exec.Cmd, *lockedBuffer) { return startRuntimeByHand(t, state) }
	cmd, out := start()
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}()
	c := crictlRunner{t: t, bin: crictlBin, sock: n.CRISocket(), home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.home, "crictl.yaml"), []byte("timeout: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := host + "/podlab/hello:1.0"
	c.must("pull", ref)
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod.json")
	writeJSON(t, pod, map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "uid-web"}})
	podID := strings.TrimSpace(c.must("runp", pod))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 15))
	cleaned := 0
	for i := range 6 {
		kind, records := "container", n.CRIContainersDir()
		if i%3 == 2 {
			kind, records = "sandbox", n.CRISandboxesDir()
		}
		// The kill lands inside the create, every time: once the new
		// record says "creating" (written before anything is made),
		// after a random delay; a create done before the runtime could
		// be stopped is let finish, and another one is killed with no
		// delay. (A kill at a random time after starting crictl, as
		// this test did, may land before the request reaches the
		// runtime, under load, or after the create is done: then a
		// restart has nothing to clean.)
		delay := time.Duration(rng.IntN(40)) * time.Millisecond
		for attempt := 0; ; attempt++ {
			var args []string
			if kind == "sandbox" {
				p := filepath.Join(dir, fmt.Sprintf("pod-%d-%d.json", i, attempt))
				writeJSON(t, p, map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("p%d-%d", i, attempt), "namespace": "default", "uid": fmt.Sprintf("uid-%d-%d", i, attempt)}})
				args = []string{"runp", p}
			} else {
				ctr := filepath.Join(dir, fmt.Sprintf("ctr-%d-%d.json", i, attempt))
				writeJSON(t, ctr, map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("c%d-%d", i, attempt)}, "image": map[string]any{"image": ref}})
				args = []string{"create", podID, ctr, pod}
			}
			known := recordIDs(records)
			done := make(chan struct{})
			go func() { defer close(done); c.run(args...) }()
			killed := killMidCreate(t, cmd, records, known, delay, done)
			<-done
			if killed {
				break
			}
			if attempt == 4 {
				t.Fatalf("%s %d: 5 creates were done before the runtime could be stopped", kind, i)
			}
			delay = 0
		}
		cmd, out = start()
		if !strings.Contains(out.String(), "removed the stale socket "+n.CRISocket()) {
			t.Errorf("the restart did not say it removed the killed runtime's socket:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "cleaned the half-made "+kind) {
			t.Errorf("%s %d: the runtime was killed mid-create, and the restart did not clean the half-made %s:\n%s", kind, i, kind, out.String())
		}
		cleaned += strings.Count(out.String(), "cleaned the half-made")
		checkNoOrphans(t, n)
		// the overlay probe (the first container create after a start
		// runs it) leaves no mount, even killed
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(n.SnapshotsDir()))
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(ms, func(m *mountinfo.Info) bool { return strings.Contains(m.Mountpoint, "/multiple-lowerdir-check") }); i >= 0 {
			t.Errorf("an overlay probe's mount was left behind: %s", ms[i].Mountpoint)
		}
	}
	t.Logf("%d restarts found a half-made create to clean", cleaned)
	for _, id := range strings.Fields(c.must("pods", "-q")) {
		c.must("stopp", id)
		c.must("rmp", id)
	}
	checkNoOrphans(t, n)
	for _, d := range []string{n.RuncRoot(), n.BundlesDir(), n.CRIContainersDir(), n.CRISandboxesDir()} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			t.Errorf("%s is not empty after every pod was removed: %v", d, entries)
		}
	}
}

// recordIDs are the ids of the runtime's records in dir.
func recordIDs(dir string) map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(id, ".") {
			out[id] = true
		}
	}
	return out
}

// recordState is the state a record of dir says, "" if there is none.
func recordState(dir, id string) string {
	var r struct{ State string }
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil || json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.State
}

// killMidCreate kills the runtime cmd inside a create: once a new record
// of dir (not in known) says "creating", and delay later, it stops the
// runtime (SIGSTOP: it writes nothing more), checks that the record still
// says "creating", and kills it (SIGKILL). When the create was done
// before the runtime stopped (or crictl ended, done), it lets the runtime
// go on and says false.
func killMidCreate(t *testing.T, cmd *exec.Cmd, dir string, known map[string]bool, delay time.Duration, done <-chan struct{}) bool {
	t.Helper()
	var id string
	for id == "" {
		for rid := range recordIDs(dir) {
			if !known[rid] && recordState(dir, rid) == "creating" {
				id = rid
			}
		}
		if id != "" {
			break
		}
		select {
		case <-done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(delay)
	pid := cmd.Process.Pid
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// pid (comm) state ...: comm may hold spaces, the state follows ")"
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime (pid %d) did not stop on SIGSTOP: %s", pid, b)
		}
	}
	if st := recordState(dir, id); st != "creating" {
		unix.Kill(pid, unix.SIGCONT)
		t.Logf("the create of %s was done (%q) before the runtime stopped, %v after its record: another one", id, st, delay)
		return false
	}
	cmd.Process.Kill()
	cmd.Wait()
	return true
}

// startRuntimeByHand starts `podlab runtime --node node-1 -v --insecure` on
// state, as a learner does in a terminal of its own, and waits until it
// serves: the command and its output so far. Stopping it is the caller's.
func startRuntimeByHand(t *testing.T, state string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--state-dir", state, "runtime", "--node", "node-1", "-v", "--insecure")
	cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1", "PODLAB_RUNTIME="+testenv.Runc(t))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "Ctrl-C stops"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("podlab runtime did not start:\n%s", out.String())
		}
	}
	return cmd, out
}

// runtimeID is how podlab's runtime names sandboxes and containers.
var runtimeID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkNoOrphans fails t for what no record of node's runtime names.
func checkNoOrphans(t *testing.T, n statedir.Node) {
	t.Helper()
	records := func(dir string) map[string]string {
		out := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || strings.HasPrefix(id, ".") {
				continue
			}
			var r struct{ State string }
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil || json.Unmarshal(b, &r) != nil {
				t.Errorf("record %s: unreadable: %v", e.Name(), err)
			}
			out[id] = r.State
		}
		return out
	}
	containers, sandboxes := records(n.CRIContainersDir()), records(n.CRISandboxesDir())
	for id, st := range containers {
		if st == "creating" {
			t.Errorf("container %s is still recorded \"creating\" after the restart", id)
		}
	}
	for id, st := range sandboxes {
		if st == "creating" {
			t.Errorf("sandbox %s is still recorded \"creating\" after the restart", id)
		}
	}
	named := func(what, dir string, in map[string]string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if what == "the cgroup" && !e.IsDir() {
				continue // a cgroup's files
			}
			if _, ok := in[e.Name()]; !ok && !strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s %s has no record", what, filepath.Join(dir, e.Name()))
			}
		}
	}
	named("runc's container", n.RuncRoot(), containers)
	named("the shim's directory", n.ContainersDir(), containers)
	named("the pod directory", n.PodsDir(), sandboxes)
	for _, k := range statedir.NamespaceKinds() {
		named("the namespace mount", n.NamespaceDir(k), sandboxes)
	}
	sbDirs, _ := os.ReadDir(n.BundlesDir())
	for _, sb := range sbDirs {
		named("the bundle", filepath.Join(n.BundlesDir(), sb.Name()), containers)
	}
	mounts, err := runc.HostCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	// Under kubepods: the containers' cgroups, and the pause processes'
	// (a leaf named by the sandbox's id), directly there (crictl gives no
	// cgroup_parent) or below the kubelet's QoS and pod cgroups
	// (kubepods/besteffort/pod<uid>/<id>): every cgroup named as the
	// runtime names its ids (64 hex digits) is recorded.
	recorded := maps.Clone(containers)
	maps.Copy(recorded, sandboxes)
	for _, m := range mounts {
		filepath.WalkDir(m.Dir(n.KubepodsCgroup()), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || !runtimeID.MatchString(d.Name()) {
				return nil
			}
			if _, ok := recorded[d.Name()]; !ok {
				t.Errorf("the cgroup %s has no record", path)
			}
			return filepath.SkipDir
		})
	}
	// The overlayfs snapshotter: every active snapshot (a container's
	// upper directory, keyed <sandbox>/<container>) and every rootfs mount
	// under the node belong to a recorded container.
	if _, err := os.Stat(n.SnapshotsDir()); err == nil {
		snaps, err := unpack.OpenSnapshots(n.SnapshotsDir())
		if err != nil {
			t.Fatal(err)
		}
		all, err := snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range all {
			if sn.Kind != unpack.Active {
				continue
			}
			_, ctr, _ := strings.Cut(sn.Name, "/")
			if _, ok := containers[ctr]; !ok {
				t.Errorf("the active snapshot %d (%s) has no container record", sn.ID, sn.Name)
			}
		}
	}
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(n.BundlesDir()))
	if err != nil {
		t.Fatal(err)
	}
	for _, mi := range infos {
		if _, ok := containers[filepath.Base(filepath.Dir(mi.Mountpoint))]; !ok {
			t.Errorf("the mount %s (%s) has no container record", mi.Mountpoint, mi.FSType)
		}
	}
}

// TestRuntime_ResetStopsIt: a runtime left running (by hand, or started by
// a kubelet) records its pid, and podlab reset stops it before it deletes
// the node's containers; the pause process of its sandbox (pid mode POD,
// crictl's default), which outlives the runtime, is stopped too, and no
// cgroup is left busy.
func TestRuntime_ResetStopsIt(t *testing.T) {
	testenv.RequireRoot(t)
	crictlBin := testenv.LookPath(t, "crictl")
	state := testenv.StateDir(t)
	cmd, out := startComponent(t, state, "runtime", "--node", "node-1")
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "Ctrl-C stops"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("podlab runtime did not start:\n%s", out.String())
		}
	}
	n := statedir.Layout{Dir: state}.Node("node-1")
	if b, err := os.ReadFile(n.RuntimePidFile()); err != nil || !strings.HasPrefix(string(b), strconv.Itoa(cmd.Process.Pid)+" ") {
		t.Fatalf("%s = %q, %v; want the runtime's pid %d", n.RuntimePidFile(), b, err, cmd.Process.Pid)
	}
	c := crictlRunner{t: t, bin: crictlBin, sock: n.CRISocket(), home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.home, "crictl.yaml"), []byte("runtime-endpoint: unix://"+n.CRISocket()+"\ntimeout: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(t.TempDir(), "pod-config.json")
	writeJSON(t, pod, map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "web-uid-1"}, "hostname": "web"})
	podID := strings.TrimSpace(c.must("runp", pod))
	var info struct {
		Info struct {
			PausePid int `json:"pausePid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(c.must("inspectp", podID)), &info); err != nil || info.Info.PausePid <= 0 {
		t.Fatalf("crictl inspectp %s: no pausePid (%v)", podID, err)
	}
	pause := info.Info.PausePid
	t.Cleanup(func() { _ = syscall.Kill(pause, syscall.SIGKILL) })

	got := mustPodlab(t, state, "reset", "--yes")
	if want := fmt.Sprintf("node node-1: pid %d", cmd.Process.Pid); !strings.Contains(got, "Stopped the nodes' runtimes (podlab runtime)") || !strings.Contains(got, want) {
		t.Errorf("reset does not say it stopped the runtime (%s):\n%s", want, got)
	}
	if want := fmt.Sprintf("node node-1: sandbox %s pid %d", podID, pause); !strings.Contains(got, "Stopped pause processes") || !strings.Contains(got, want) {
		t.Errorf("reset does not say it stopped the pause process (%s):\n%s", want, got)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pause)); err == nil && !strings.Contains(string(b), ") Z") {
		t.Errorf("the pause process %d still runs after reset: %s", pause, b)
	}
	if strings.Contains(got, "Cgroups left under") {
		t.Errorf("reset left busy cgroups:\n%s", got)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(out.String(), "stopped\n"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the runtime did not stop on reset's SIGTERM:\n%s", out.String())
		}
	}
}

// podlab runtime takes the kubelet's --runtime-handler and a snapshotter,
// and says which it serves with; bad values are refused before the socket.
func TestRuntime_HandlersAndSnapshotter(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a handler without a path", []string{"--runtime-handler", "fast"}, "want NAME=PATH"},
		{"an unknown snapshotter", []string{"--snapshotter", "zfs"}, "choose native"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := podlab(t, state, append([]string{"runtime", "--node", "node-3"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("podlab runtime %v: %v, want an error saying %q", tc.args, err, tc.want)
			}
		})
	}
	_, out := startComponent(t, state, "runtime", "--node", "node-1", "--runtime-handler", "fast=/bin/true", "--snapshotter", "native")
	want := "fast=/bin/true; snapshotter native"
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the runtime's output:\n%s", want, out.String())
		}
	}
}
