package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/trace"
)

// traceApp runs podlab with the trace, scheduler and kubelet commands in
// it (whether or not app.go lists them yet).
func traceApp(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	for _, cmd := range []*cli.Command{traceCommand, schedulerCommand, kubeletCommand} {
		if app.Command(cmd.Name) == nil {
			app.Commands = append(app.Commands, cmd)
		}
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func mustTraceApp(t *testing.T, state string, args ...string) string {
	t.Helper()
	out, err := traceApp(t, state, args...)
	if err != nil {
		t.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// stagesOf are the stage names of a JSON trace, with their components.
func stagesOf(t *testing.T, out string) []trace.Record {
	t.Helper()
	var recs []trace.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("trace -o json is not a JSON array of records: %v\n%s", err, out)
	}
	return recs
}

// inOrder checks that want (stage@component) appear in recs in that order.
func inOrder(t *testing.T, recs []trace.Record, want ...string) {
	t.Helper()
	var got []string
	for _, r := range recs {
		got = append(got, r.Stage+"@"+r.Component)
	}
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("the trace lacks %q after %q:\n%s", want[i], want[:i], strings.Join(got, "\n"))
	}
}

// TestTraceCommand traces a pod the scheduler first could not place (its
// node not Ready), then bound: podlab run, scheduler --once twice.
func TestTraceCommand(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "node", "add", "node-1", "--cpu", "2", "--memory", "4Gi")
	mustPodlab(t, state, "run", "web", "--image", "nginx")
	mustTraceApp(t, state, "scheduler", "--once")
	markNodeReady(t, state, "node-1")
	mustTraceApp(t, state, "scheduler", "--once")

	out := mustTraceApp(t, state, "trace", "pod/web")
	t.Logf("podlab trace pod/web:\n%s", out)
	for _, want := range []string{
		"pod default/web (uid ", "node node-1",
		"T+ms", "REVISION", "COMPONENT", "STAGE", "DETAIL",
		"kube-apiserver", "created", "stored /registry/pods/default/web (no node yet)",
		"default-scheduler", "unschedulable", "FailedScheduling", "bound", "Scheduled",
		"create -> Running: not reached",
		"waiting for a node (scheduling)",
		"The watch log is complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("trace pod/web does not say %q", want)
		}
	}

	// "trace web" takes a pod, -n default is the default
	recs := stagesOf(t, mustTraceApp(t, state, "trace", "web", "-n", "default", "-o", "json"))
	inOrder(t, recs, "created@kube-apiserver", "unschedulable@default-scheduler", "FailedScheduling@default-scheduler",
		"bound@default-scheduler", "Scheduled@default-scheduler")
	if recs[0].TMs != 0 || recs[0].Revision == 0 {
		t.Errorf("the first record: %+v", recs[0])
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Revision <= recs[i-1].Revision {
			t.Errorf("revisions out of order: %d then %d", recs[i-1].Revision, recs[i].Revision)
		}
	}

	out = mustTraceApp(t, state, "trace", "pod", "web", "-o", "mermaid")
	if !strings.HasPrefix(out, "sequenceDiagram\n    participant U as User\n") ||
		!strings.Contains(out, "SCHED->>API: bind web to node-1 (pods/binding)") {
		t.Errorf("trace -o mermaid:\n%s", out)
	}
}

// TestTraceCommand_BadInputs: each fails with a clear error.
func TestTraceCommand_BadInputs(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"no such pod", []string{"trace", "pod/nope"}, "pod default/nope: never created: not in the store, and not in its watch log"},
		{"no such pod, a bare name", []string{"trace", "nope"}, "pod default/nope: never created"},
		{"no such deployment", []string{"trace", "deployment/x"}, "deployment default/x: never created"},
		{"an unsupported kind", []string{"trace", "replicaset/x"}, "podlab trace follows pods and deployments"},
		{"an unknown kind", []string{"trace", "gadget/x"}, `doesn't have a resource type "gadget"`},
		{"nothing", []string{"trace"}, "trace what?"},
		{"an unknown format", []string{"trace", "pod/web", "-o", "xml"}, "-o xml: unknown output format: choose one of text, mermaid, json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := traceApp(t, state, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("podlab %s: %v; want an error saying %q\n%s", strings.Join(tc.args, " "), err, tc.says, out)
			}
		})
	}
}

// TestTraceCommand_RealPod traces a pod the kubelet really ran with runc,
// from podlab run to its deletion.
func TestTraceCommand_RealPod(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1") // the kubelet's shim is this test binary, run as podlab
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	ref := helloRegistry(t)

	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	t.Cleanup(func() {
		podlab(t, state, "delete", "pod", "web", "--force")
		traceApp(t, state, "kubelet", "--once")
	})
	mustTraceApp(t, state, "kubelet", "--once") // registers node-1, Ready
	mustPodlab(t, state, "run", "web", "--image", ref)
	mustTraceApp(t, state, "scheduler", "--once")
	mustTraceApp(t, state, "kubelet", "--once")
	mustPodlab(t, state, "delete", "pod", "web")
	mustTraceApp(t, state, "kubelet", "--once")

	out := mustTraceApp(t, state, "trace", "pod/web")
	t.Logf("podlab trace pod/web:\n%s", out)
	if !strings.Contains(out, "create -> Running: ~") || !strings.Contains(out, "create -> deleted: ~") {
		t.Errorf("trace does not give create -> Running and -> deleted:\n%s", out)
	}
	recs := stagesOf(t, mustTraceApp(t, state, "trace", "pod/web", "-o", "json"))
	inOrder(t, recs,
		"created@kube-apiserver", "bound@default-scheduler", "Scheduled@default-scheduler",
		"sandbox@kubelet/node-1", "Pulling@kubelet/node-1", "Pulled@kubelet/node-1",
		"Created@kubelet/node-1", "Started@kubelet/node-1", "Running@kubelet/node-1",
		"delete requested@kube-apiserver", "Killing@kubelet/node-1", "deleted@kubelet/node-1")
	if i := slices.IndexFunc(recs, func(r trace.Record) bool { return r.Stage == "Pulled" }); i < 0 || !strings.Contains(recs[i].Detail, images.HelloRef) {
		t.Errorf("the Pulled record: %+v", recs)
	}
	out = mustTraceApp(t, state, "trace", "pod/web", "-o", "mermaid")
	t.Logf("podlab trace pod/web -o mermaid:\n%s", out)
	for _, want := range []string{"RUNTIME->>RUNC: runc start web (event Started, rev ", "KUBELET->>API: delete pod web, grace period 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("mermaid does not say %q", want)
		}
	}
}
