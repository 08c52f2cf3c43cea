package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/statedir"
)

// learner types podlab commands as a learner does: each line a new podlab
// process (this test binary, see TestMain), with PODLAB_STATE_DIR set and
// nothing else on the command line.
type learner struct {
	t     *testing.T
	state string
	env   []string
}

func newLearner(t *testing.T) *learner {
	t.Helper()
	testenv.RequireRoot(t)
	rt := testenv.Runc(t)
	state := testenv.StateDir(t)
	env := []string{"PODLAB_TEST_RUN_MAIN=1", "PODLAB_STATE_DIR=" + state, "PODLAB_RUNTIME=" + rt}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PODLAB_") {
			env = append(env, e)
		}
	}
	return &learner{t: t, state: state, env: env}
}

// command is the process that runs line ("podlab pull nginx").
func (l *learner) command(line string) *exec.Cmd {
	l.t.Helper()
	words := strings.Fields(line)
	if len(words) == 0 || words[0] != "podlab" {
		l.t.Fatalf("not a podlab command: %q", line)
	}
	exe, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(exe, words[1:]...)
	cmd.Env = l.env
	return cmd
}

// typed runs line and returns its output (stdout and stderr); it fails the
// test when the command fails.
func (l *learner) typed(line string) string {
	l.t.Helper()
	out, err := l.command(line).CombinedOutput()
	if err != nil {
		l.t.Fatalf("$ %s: %v\n%s", line, err, out)
	}
	return string(out)
}

// fails runs line and returns its output; it fails the test when the
// command succeeds.
func (l *learner) fails(line string) string {
	l.t.Helper()
	out, err := l.command(line).CombinedOutput()
	if err == nil {
		l.t.Fatalf("$ %s succeeded, want an error:\n%s", line, out)
	}
	return string(out)
}

// serveRegistry starts `podlab registry serve` on a free port with the demo
// images, as the lessons' set-up does, and waits until it is ready; it is
// stopped when the test ends. It returns the registry's address.
func (l *learner) serveRegistry() string {
	l.t.Helper()
	images := testenv.DemoImages(l.t)
	logPath := filepath.Join(l.t.TempDir(), "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := l.command("podlab registry serve --addr 127.0.0.1:0 --images " + images)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	addr := regexp.MustCompile(`Registry listening on http://(\S+) `)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if m := addr.FindSubmatch(b); m != nil && strings.Contains(string(b), "Serving until Ctrl-C") {
			return string(m[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(logPath)
	l.t.Fatalf("the registry was not ready within 60s:\n%s", b)
	return ""
}

// pidOf is the host pid of container id's process (runc's state.json).
func (l *learner) pidOf(id string) int {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(statedir.Layout{Dir: l.state}.Runtime().RuncRoot(), id, "state.json"))
	if err != nil {
		l.t.Fatalf("reading runc's state of %s: %v", id, err)
	}
	var st struct {
		Pid int `json:"init_process_pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Pid == 0 {
		l.t.Fatalf("runc's state of %s: %v (%s)", id, err, b)
	}
	return st.Pid
}

// getInNetns asks http://127.0.0.1:80/ from inside the network namespace
// of pid (a by-hand container has a network namespace of its own, only
// lo in it), bringing its loopback up first, for up to 10 s while the
// app starts.
func getInNetns(t *testing.T, pid int) (int, string) {
	t.Helper()
	var conn net.Conn
	err := func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.GetFromPid(pid)
		if err != nil {
			return err
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			return err
		}
		defer netns.Set(orig) //nolint:errcheck // the thread is locked; a failure leaves it to die with the test
		if err := testenv.LoopbackUp(); err != nil {
			return fmt.Errorf("bringing up lo: %w", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			// The socket is made here, in the container's namespace;
			// it stays there when the thread goes back.
			conn, err = (&net.Dialer{}).DialContext(context.Background(), "tcp", "127.0.0.1:80")
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if err != nil {
		t.Fatalf("connecting to 127.0.0.1:80 in the network namespace of pid %d: %v", pid, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading nginx's answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func wantLines(t *testing.T, line, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("$ %s: the output lacks %q:\n%s", line, w, out)
		}
	}
}

// TestLearner_ThreeCommandsAsTyped is issue 16's "the three commands as
// typed": on a fresh state directory after the set-up (podlab init, podlab
// registry serve), a learner types exactly podlab pull nginx, podlab
// unpack, podlab spec and podlab runc run -d, and nginx answers HTTP;
// then podlab runc delete --force, podlab runc create nginx (the bundle
// bundles/nginx) and podlab runc start, and it answers again.
func TestLearner_ThreeCommandsAsTyped(t *testing.T) {
	l := newLearner(t)
	l.typed("podlab init")
	reg := l.serveRegistry()

	steps := []struct {
		line string
		want []string
	}{
		{"podlab pull nginx", []string{"Pulled docker.io/library/nginx:latest", "(mirror http://" + reg + " for docker.io)"}},
		{"podlab unpack", []string{"unpacking nginx (the image pulled last) into bundles/nginx\n"}},
		{"podlab spec", []string{"writing the spec of bundles/nginx (the bundle unpacked last, from image nginx)\n"}},
		{"podlab runc run -d", []string{"creating nginx from bundles/nginx (the bundle whose spec was written last)\n", "Started container nginx"}},
	}
	for _, s := range steps {
		wantLines(t, s.line, l.typed(s.line), s.want...)
	}
	t.Cleanup(func() { l.command("podlab runc delete --force nginx").Run() })
	if code, body := getInNetns(t, l.pidOf("nginx")); code != http.StatusOK || !strings.Contains(body, "nginx") {
		t.Fatalf("nginx after podlab runc run -d answered %d:\n%s", code, body)
	}

	// Again, in two steps: create, then start (runc's start only starts a
	// created container).
	wantLines(t, "podlab runc delete --force", l.typed("podlab runc delete --force"), "container nginx (the container created last)", "Deleted container nginx")
	wantLines(t, "podlab runc start", l.fails("podlab runc start"), "no container created yet", "podlab runc create   (it takes nginx, the bundle whose spec was written last)")
	wantLines(t, "podlab runc create nginx", l.typed("podlab runc create nginx"), "No --bundle given: using bundles/nginx", "Created container nginx")
	wantLines(t, "podlab runc start", l.typed("podlab runc start"), "container nginx (the container created last)", "Started container nginx")
	if code, body := getInNetns(t, l.pidOf("nginx")); code != http.StatusOK || !strings.Contains(body, "nginx") {
		t.Fatalf("nginx after podlab runc create and start answered %d:\n%s", code, body)
	}
}

// TestLearner_RememberedDefaults_Bad: what a learner may type out of order,
// each on a fresh state directory: the stage says what is missing and the
// command that makes it; an explicit argument always wins over the record.
// In-process, no runc: every case is decided before runc would run.
func TestLearner_RememberedDefaults_Bad(t *testing.T) {
	host := demoRegistry(t)
	hello, nginx := host+"/podlab/hello:1.0", host+"/library/nginx:latest"
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}()
	tests := []struct {
		name    string
		before  [][]string // commands that must succeed first
		remove  string     // a path under the state directory removed before args
		mirror  string     // written into certs.d/<host>/hosts.toml first, as registry serve does
		args    []string
		wantErr bool
		want    []string // in the error, or in the output
	}{
		{name: "unpack with nothing pulled", args: []string{"unpack"}, wantErr: true,
			want: []string{"none pulled yet", "podlab pull nginx"}},
		{name: "spec with nothing unpacked", args: []string{"spec"}, wantErr: true,
			want: []string{"none unpacked yet", "podlab unpack"}},
		{name: "runc create with no spec written", args: []string{"runc", "create"}, wantErr: true,
			want: []string{"no spec written yet", "podlab spec"}},
		{name: "runc start with nothing created", args: []string{"runc", "start"}, wantErr: true,
			want: []string{"no container created yet", "podlab runc create ID --bundle DIR", "podlab runc run -d"}},
		{name: "two images pulled: unpack takes the last",
			before: [][]string{{"pull", hello}, {"pull", nginx}}, args: []string{"unpack"},
			want: []string{"unpacking " + nginx + " (the image pulled last) into bundles/nginx\n"}},
		{name: "an explicit image wins over the one pulled last",
			before: [][]string{{"pull", hello}, {"pull", nginx}}, args: []string{"unpack", hello},
			want: []string{"Unpacking " + hello, "bundles/hello"}},
		{name: "spec of the bundle unpacked last",
			before: [][]string{{"pull", hello}, {"pull", nginx}, {"unpack", nginx}, {"unpack", hello}}, args: []string{"spec"},
			want: []string{"writing the spec of bundles/hello (the bundle unpacked last, from image " + hello + ")"}},
		{name: "an explicit image wins over the bundle unpacked last",
			before: [][]string{{"pull", hello}, {"pull", nginx}, {"unpack", nginx}, {"unpack", hello}}, args: []string{"spec", "--image", nginx},
			want: []string{"No --bundle given: writing the spec into ", "bundles/nginx", "of container nginx (image " + nginx + ")"}},
		{name: "the bundle unpacked last was deleted",
			before: [][]string{{"pull", hello}, {"unpack"}}, remove: "bundles/hello", args: []string{"spec"}, wantErr: true,
			want: []string{"bundles/hello, the bundle unpacked last, is gone", "podlab unpack " + hello}},
		{name: "the bundle whose spec was written last was deleted",
			before: [][]string{{"pull", hello}, {"unpack"}, {"spec"}}, remove: "bundles/hello", args: []string{"runc", "create"}, wantErr: true,
			want: []string{"bundles/hello, the bundle whose spec was written last, has no config.json", "podlab spec --bundle"}},
		{name: "runc create ID without a bundle of that name",
			args: []string{"runc", "create", "web"}, wantErr: true,
			want: []string{"No --bundle given: using bundles/web", "bundles/web: make one with `podlab unpack IMAGE --bundle"}},
		{name: "runc start after a spec, nothing created",
			before: [][]string{{"pull", hello}, {"unpack"}, {"spec"}}, args: []string{"runc", "start"}, wantErr: true,
			want: []string{"no container created yet", "podlab runc create   (it takes hello, the bundle whose spec was written last)"}},
		{name: "pull nginx with no mirror configured",
			args: []string{"pull", "nginx"}, wantErr: true,
			want: []string{"no mirror is configured for docker.io", "certs.d/docker.io/hosts.toml does not exist", "podlab registry serve"}},
		{name: "pull nginx with the mirror down",
			mirror: dead, args: []string{"pull", "nginx"}, wantErr: true,
			want: []string{"the mirror " + dead, "certs.d/docker.io/hosts.toml", "podlab registry serve"}},
		{name: "pull nginx through the mirror hosts.toml names",
			mirror: "http://" + host, args: []string{"pull", "nginx"},
			want: []string{"Pulled docker.io/library/nginx:latest", "(mirror http://" + host + " for docker.io)"}},
		{name: "--registry-mirror wins over hosts.toml",
			mirror: dead, args: []string{"pull", "nginx", "--registry-mirror", "http://" + host},
			want: []string{"Pulled docker.io/library/nginx:latest", "(mirror http://" + host + " for docker.io)"}},
		{name: "a dead --registry-mirror",
			args: []string{"pull", "nginx", "--registry-mirror", dead}, wantErr: true,
			want: []string{"registry unreachable", "podlab registry serve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PODLAB_REGISTRY_MIRROR", "")
			state := t.TempDir()
			if tt.mirror != "" {
				if _, err := containerd.WriteHosts(statedir.Layout{Dir: state}.CertsDir(), tt.mirror); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range tt.before {
				mustPodlab(t, state, args...)
			}
			if tt.remove != "" {
				if err := os.RemoveAll(filepath.Join(state, tt.remove)); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, err := podlab(t, state, tt.args...)
			text := out + errOut
			if err != nil {
				text += err.Error()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("podlab %s: err = %v, wantErr %v\n%s", strings.Join(tt.args, " "), err, tt.wantErr, text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("podlab %s: lacks %q:\n%s", strings.Join(tt.args, " "), w, text)
				}
			}
		})
	}
}

// TestInit_WritesMirrors: podlab init names the lab registry's default
// address as docker.io's mirror, and keeps a hosts.toml that is there
// (podlab registry serve writes the address it really listens on).
func TestInit_WritesMirrors(t *testing.T) {
	state := t.TempDir()
	file := filepath.Join(statedir.Layout{Dir: state}.CertsDir(), "docker.io", "hosts.toml")
	mustPodlab(t, state, "init")
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `[host."http://127.0.0.1:5001"]`) {
		t.Fatalf("after podlab init, %s: %v\n%s", file, err, b)
	}
	if _, err := containerd.WriteHosts(statedir.Layout{Dir: state}.CertsDir(), "http://127.0.0.1:40001"); err != nil {
		t.Fatal(err)
	}
	mustPodlab(t, state, "init")
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "127.0.0.1:40001") {
		t.Fatalf("podlab init replaced the mirror registry serve wrote:\n%s", b)
	}
}

// TestMakefile_HonoursPodlabStateDir: every Makefile target works on the
// state directory podlab itself uses, $PODLAB_STATE_DIR, unless STATE_DIR=
// is given (make -n: what would run): images and demo-run, demo (which runs
// them), and the demo images and .deb cache that test and bench hand their
// tests (exported to every recipe; printed here by an added target).
func TestMakefile_HonoursPodlabStateDir(t *testing.T) {
	mk := testenv.LookPath(t, "make")
	mine, other := t.TempDir(), t.TempDir()
	show := "--eval=show-env: ; @echo PODLAB_DEMO_IMAGES=$$PODLAB_DEMO_IMAGES PODLAB_DEB_CACHE=$$PODLAB_DEB_CACHE"
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"images and demo-run: PODLAB_STATE_DIR", []string{"PODLAB_STATE_DIR=" + mine}, []string{"images", "demo-run"},
			[]string{"--out " + mine + "/demo-images --cache " + mine + "/cache/debs", "podlab --state-dir " + mine + " up"}},
		{"images and demo-run: STATE_DIR= wins", []string{"PODLAB_STATE_DIR=" + mine}, []string{"images", "demo-run", "STATE_DIR=" + other},
			[]string{"--out " + other + "/demo-images", "podlab --state-dir " + other + " up"}},
		{"demo", []string{"PODLAB_STATE_DIR=" + mine}, []string{"demo"},
			[]string{"--out " + mine + "/demo-images --cache " + mine + "/cache/debs", "podlab --state-dir " + mine + " up"}},
		{"what test and bench export", []string{"PODLAB_STATE_DIR=" + mine}, []string{show, "show-env"},
			[]string{"PODLAB_DEMO_IMAGES=" + mine + "/demo-images PODLAB_DEB_CACHE=" + mine + "/cache/debs"}},
		{"what test and bench export: STATE_DIR= wins", []string{"PODLAB_STATE_DIR=" + mine}, []string{show, "show-env", "STATE_DIR=" + other},
			[]string{"PODLAB_DEMO_IMAGES=" + other + "/demo-images PODLAB_DEB_CACHE=" + other + "/cache/debs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-n", "-C", testenv.RepoRoot()}, tt.args...)
			if tt.args[0] == show {
				args = append([]string{"-s", "-C", testenv.RepoRoot()}, tt.args...) // run the added target itself
			}
			cmd := exec.Command(mk, args...)
			cmd.Env = makeEnv(tt.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("make %s lacks %q:\n%s", strings.Join(tt.args, " "), w, out)
				}
			}
		})
	}
}

// makeEnv is this process's environment without what would steer the
// Makefile (PODLAB_*, STATE_DIR, MAKEFLAGS), plus extra.
func makeEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PODLAB_") && !strings.HasPrefix(e, "STATE_DIR=") && !strings.HasPrefix(e, "MAKEFLAGS=") &&
			!strings.HasPrefix(e, "MAKELEVEL=") && !strings.HasPrefix(e, "MFLAGS=") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

// TestMakefile_DemoBuildsOnlyWhatUpRuns: make demo installs and builds what
// podlab up runs (the Debian packages that build runc and the demo images,
// runc, podlab and podlab-runc, the demo images) and nothing else, in 4
// numbered stages; kubectl, etcd, etcdctl, crictl, crane and the tests'
// Debian packages are built by the targets that run them (make test, make
// bench, make tools), which still build all of them (make -n: what would
// run, whatever bin/ holds now); the real kube-apiserver only make bench
// builds.
func TestMakefile_DemoBuildsOnlyWhatUpRuns(t *testing.T) {
	mk := testenv.LookPath(t, "make")
	state := t.TempDir()
	// the tools the demo does not run, as their recipes name them
	tools := []string{"kubectl", "etcd", "etcdctl", "crictl", "crane"}
	// Debian packages only the tests, lessons and benchmarks use
	testPkgs := []string{"umoci", "containerd", "runsc", "crun", "containernetworking-plugins", "python3"}
	// the real kube-apiserver, built for make bench only (7 minutes)
	const kubeAPIServer = "cd tools/kube-apiserver"
	tests := []struct {
		name        string
		args        []string
		want, avoid []string
	}{
		{"demo", []string{"demo"},
			[]string{"[1/4] Debian packages: libseccomp-dev pkg-config gcc libc6-dev", "[2/4] runc v1.5.3 and podlab",
				"go install -tags seccomp github.com/opencontainers/runc@v1.5.3", "./cmd/podlab ./cmd/podlab-runc",
				"[3/4] the demo images", "go run ./images/build --out " + state + "/demo-images",
				"[4/4] podlab up", "podlab --state-dir " + state + " up", "[4/4] done in "},
			append(append([]string{kubeAPIServer}, tools...), testPkgs...)},
		{"test", []string{"test"}, append(append([]string{"go test -count=1 -timeout 60m ./...", "runc@v1.5.3"}, tools...), testPkgs...),
			[]string{kubeAPIServer}},
		{"bench", []string{"bench"}, append(append([]string{"-bench", "runc@v1.5.3", kubeAPIServer}, tools...), testPkgs...), nil},
		{"tools", []string{"tools"}, tools, []string{"-tags seccomp", "./cmd/podlab", kubeAPIServer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(mk, append([]string{"-n", "-C", testenv.RepoRoot()}, tt.args...)...)
			cmd.Env = makeEnv("PODLAB_STATE_DIR=" + state)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("make -n %s lacks %q:\n%s", strings.Join(tt.args, " "), w, out)
				}
			}
			for _, a := range tt.avoid {
				// as a word: etcd is not etcdctl, ./cmd/podlab is not ./cmd/podlab-runc
				if regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(a) + `($|[^a-z0-9-])`).MatchString(string(out)) {
					t.Errorf("make -n %s would install or build %s:\n%s", strings.Join(tt.args, " "), a, out)
				}
			}
		})
	}
}

// TestMakefile_DemoPackages_Bad: a learner who is not root and lacks a
// package the demo needs is told which and what to run; nothing else runs.
func TestMakefile_DemoPackages_Bad(t *testing.T) {
	mk := testenv.LookPath(t, "make")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not root, a package missing", []string{"apt-demo", "UID=1000", "DEMO_APT_PACKAGES=podlab-no-such-package"},
			"missing Debian packages: podlab-no-such-package (run 'sudo make apt-demo')"},
		{"make demo stops at its first stage", []string{"demo", "UID=1000", "DEMO_APT_PACKAGES=podlab-no-such-package"},
			"missing Debian packages: podlab-no-such-package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// GO=false and an empty BIN: a make demo that went on would
			// fail at once rather than build and run the demo for real
			args := append([]string{"-C", testenv.RepoRoot(), "GO=false", "BIN=" + t.TempDir()}, tt.args...)
			cmd := exec.Command(mk, args...)
			cmd.Env = makeEnv("PODLAB_STATE_DIR=" + t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("make %s succeeded:\n%s", strings.Join(tt.args, " "), out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("make %s lacks %q:\n%s", strings.Join(tt.args, " "), tt.want, out)
			}
			if strings.Contains(string(out), "[2/4]") {
				t.Errorf("make %s went on past the missing packages:\n%s", strings.Join(tt.args, " "), out)
			}
		})
	}
}
