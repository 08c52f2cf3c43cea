package main

import (
	"bytes"
	"github.com/podlab/podlab/internal/testenv"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/cliargs"
)

// schedulerApp runs podlab with the scheduler command in it (whether or
// not app.go lists it yet).
func schedulerApp(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	if app.Command("scheduler") == nil {
		app.Commands = append(app.Commands, schedulerCommand)
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func TestSchedulerOnce(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "node", "add", "node-1", "--cpu", "2", "--memory", "4Gi")
	mustPodlab(t, state, "run", "web", "--image", "nginx")

	// The node's kubelet has never reported: Ready is Unknown.
	out, err := schedulerApp(t, state, "scheduler", "--once")
	if err != nil {
		t.Fatalf("scheduler --once: %v\n%s", err, out)
	}
	for _, want := range []string{
		"pod default/web (attempt 1): requests nothing (the scores count cpu 100m, memory 200Mi",
		"NODE", "NodeResourcesFit x1", "TOTAL",
		"node-1: its kubelet has not reported it Ready (Ready is Unknown or missing), so it counts as tainted node.kubernetes.io/unreachable:NoSchedule",
		"default/web is unschedulable: 0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }.",
		"scheduled once: 0 bound, 1 unschedulable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scheduler --once does not say %q:\n%s", want, out)
		}
	}

	// Its kubelet reports Ready, as podlab kubelet would.
	markNodeReady(t, state, "node-1")

	out, err = schedulerApp(t, state, "scheduler", "--once")
	if err != nil {
		t.Fatalf("scheduler --once: %v\n%s", err, out)
	}
	for _, want := range []string{
		"bound default/web to node-1 (the only node that passed every filter, so nothing to score)",
		"event Scheduled: Successfully assigned default/web to node-1",
		"scheduled once: 1 bound, 0 unschedulable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scheduler --once does not say %q:\n%s", want, out)
		}
	}
	if got := mustPodlab(t, state, "get", "pods", "-o", "wide"); !strings.Contains(got, "node-1") {
		t.Errorf("get pods -o wide does not show node-1:\n%s", got)
	}

	// Nothing left to do.
	out, err = schedulerApp(t, state, "scheduler", "--once")
	if err != nil || !strings.Contains(out, "scheduled once: 0 bound, 0 unschedulable") {
		t.Errorf("a third --once: %v\n%s", err, out)
	}
}
