package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// TestMain lets a test run podlab itself in a child process: with
// PODLAB_TEST_RUN_MAIN set, this test binary is podlab. Started as a
// container's shim (runc.ShimConfigEnv set), it is the shim even when a
// test forgot PODLAB_TEST_RUN_MAIN: it must never run the suite again.
func TestMain(m *testing.M) {
	if os.Getenv(runc.ShimConfigEnv) != "" {
		os.Exit(runc.ShimMain())
	}
	if os.Getenv("PODLAB_TEST_RUN_MAIN") != "" {
		if err := Run(append([]string{"podlab"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr); err != nil {
			if msg := err.Error(); msg != "" {
				os.Stderr.WriteString("podlab: " + msg + "\n")
			}
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	// Every child a test starts from this binary is podlab: the
	// components, the shim, and the node runtime a kubelet starts.
	os.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	os.Exit(m.Run())
}

// podlab runs one command in this process against state and returns its
// output and error.
func podlab(t *testing.T, state string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(append([]string{"podlab", "--state-dir", state}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustPodlab(t *testing.T, state string, args ...string) string {
	t.Helper()
	out, errOut, err := podlab(t, state, args...)
	if err != nil {
		t.Fatalf("podlab %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// TestTheGate is the "done when": init, a run that shows every
// phase and ends with a stored Pending pod, the viewer refused with 403 and
// an unknown token with 401, storing nothing.
func TestTheGate(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	out := mustPodlab(t, state, "run", "web", "--image", "nginx")
	for _, want := range []string{
		`authentication        token file: bearer token -> user "admin"`,
		`authorization         RBAC: allowed by ClusterRoleBinding "cluster-admin"`,
		"defaulting            defaults: set spec.",
		`mutating admission    NamespaceLifecycle: namespace "default" is Active`,
		"mutating admission    RuntimeClass: nothing to do",
		"validation            the object is valid",
		"validating admission  PodSecurity",
		"validating admission  RuntimeClass: nothing to do",
		"validating admission  ResourceQuota",
		"storage               etcd (bbolt): created /registry/pods/default/web at revision",
		"pod/web created",
		"Pending: it has no node, and nothing runs it yet",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab run does not say %q:\n%s", want, out)
		}
	}
	list := mustPodlab(t, state, "get", "pods")
	if !strings.Contains(list, "web    0/1     Pending   0") {
		t.Errorf("get pods:\n%s", list)
	}
	// several types at once, as kubectl get deploy,rs,pods
	mustPodlab(t, state, "create", "deployment", "site", "--image", "nginx")
	several := mustPodlab(t, state, "get", "deploy,rs,pods")
	for _, want := range []string{"NAME                   READY   UP-TO-DATE", "deployment.apps/site   0/1", "\n\nNAME      READY   STATUS", "pod/web   0/1     Pending"} {
		if !strings.Contains(several, want) {
			t.Errorf("get deploy,rs,pods does not say %q:\n%s", want, several)
		}
	}
	if strings.Contains(several, "replicaset") {
		t.Errorf("get deploy,rs,pods printed a table of no replica sets:\n%s", several)
	}
	if names := mustPodlab(t, state, "get", "pods,deploy", "-o", "name"); names != "pod/web\ndeployment.apps/site\n" {
		t.Errorf("get pods,deploy -o name:\n%s", names)
	}
	before := mustPodlab(t, state, "store", "list", "/registry/pods/", "--keys-only")

	tests := []struct {
		name string
		args []string
		says string
	}{
		{"viewer is forbidden", []string{"run", "db", "--image", "nginx", "--as", "viewer"}, `pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`},
		{"unknown token is unauthorized", []string{"--token", "nope", "run", "db", "--image", "nginx"}, "Unauthorized"},
		{"unknown user", []string{"run", "db", "--image", "nginx", "--as", "mallory"}, "no such user"},
		{"no image", []string{"run", "db"}, "needs --image"},
		{"no name", []string{"run", "--image", "nginx"}, "needs a pod name"},
		{"invalid name", []string{"run", "DB", "--image", "nginx"}, "metadata.name: Invalid value"},
		{"missing namespace", []string{"run", "db", "--image", "nginx", "-n", "nowhere"}, `namespaces "nowhere" not found`},
		{"bad env", []string{"run", "db", "--image", "nginx", "--env", "NOVALUE"}, "want NAME=VALUE"},
		{"unknown resource", []string{"get", "widgets"}, `doesn't have a resource type "widgets"`},
		{"bad output", []string{"get", "pods", "-o", "xml"}, "allowed formats"},
		{"several types and a name", []string{"get", "deploy,pods", "web"}, "name objects with one resource type"},
		{"several types watched", []string{"get", "deploy,pods", "-w"}, "watch is only supported on individual resources"},
		{"an unknown type among several", []string{"get", "pods,widgets"}, `doesn't have a resource type "widgets"`},
		{"strict apply", []string{"apply", "-f", "testdata/typo.yaml"}, `unknown field "spec.containers[0].imagePullPolicyy"`},
		{"delete default", []string{"delete", "namespace", "default"}, "may not be deleted"},
		{"bad taint", []string{"node", "add", "n2", "--taints", "gpu=true"}, "want key[=value]:Effect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := podlab(t, state, tt.args...)
			if err == nil {
				t.Fatalf("podlab %s succeeded:\n%s", strings.Join(tt.args, " "), out)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q\n%s%s", err, tt.says, out, errOut)
			}
		})
	}
	if after := mustPodlab(t, state, "store", "list", "/registry/pods/", "--keys-only"); after != before {
		t.Errorf("rejected requests changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	// can-i agrees with what happened
	if out, _, err := podlab(t, state, "auth", "can-i", "create", "pods", "--as", "viewer"); err == nil || !strings.HasPrefix(out, "no") {
		t.Errorf("can-i create pods --as viewer: %v\n%s", err, out)
	}
	if out := mustPodlab(t, state, "auth", "can-i", "create", "pods/binding", "--as", "system:kube-scheduler"); !strings.HasPrefix(out, "yes") {
		t.Errorf("can-i create pods/binding --as system:kube-scheduler:\n%s", out)
	}
}

// TestWatchInAnotherProcess runs `podlab get pods -w` as its own process
// and checks that it prints each change made by this one, as it happens.
func TestWatchInAnotherProcess(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	mustPodlab(t, state, "run", "web", "--image", "nginx")
	cmd := exec.Command(os.Args[0], "--state-dir", state, "get", "pods", "-w", "--output-watch-events")
	cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the watch ended before %s: %s", what, stderr.String())
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("no line for %s within 10s: %s", what, stderr.String())
		}
		return ""
	}
	expect := func(what string, fields ...string) {
		t.Helper()
		l := next(what)
		for _, f := range fields {
			if !strings.Contains(l, f) {
				t.Fatalf("%s: line %q lacks %q", what, l, f)
			}
		}
	}
	expect("the header", "EVENT", "NAME", "STATUS")
	expect("the listed pod", "ADDED", "web", "Pending")
	mustPodlab(t, state, "run", "db", "--image", "nginx")
	expect("the new pod", "ADDED", "db", "Pending")
	mustPodlab(t, state, "apply", "-f", "testdata/db-labelled.yaml")
	expect("the change", "MODIFIED", "db")
	mustPodlab(t, state, "delete", "pod", "db")
	expect("the deletion", "DELETED", "db")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain to the end
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("get -w after Ctrl-C: %v: %s", err, stderr.String())
	}
}
