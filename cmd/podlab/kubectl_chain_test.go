package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_TheChainsCommands types the chain's commands, in the order
// of the chain's description (lessons/README.md), with a real kubectl v1.37
// against `podlab apiserver`, while the scheduler and the controller-manager
// run as its network clients, each with its own kubeconfig: what a learner
// types on a cluster, checked line by line. No kubelet runs (the pods stay Pending on node-2); where the
// chain needs the kubelet's answer (a pod's final delete), the test
// sends it with node-2's credentials.
func TestKubectl_TheChainsCommands(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	mustPodlab(t, state, "node", "add", "node-2", "--cpu", "4", "--memory", "8Gi")
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	l := statedir.Layout{Dir: state}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// kubectl as identity; the output must hold want's fragments in order
	type step struct {
		name     string
		identity string
		args     []string
		want     []string
	}
	run := func(s step) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", l.Kubeconfig(s.identity)}, s.args...)...)
		b, err := cmd.CombinedOutput()
		out := string(b)
		if err != nil {
			t.Fatalf("%s: kubectl %s as %s: %v\n%s", s.name, strings.Join(s.args, " "), s.identity, err, out)
		}
		if missing := missingInOrder(out, s.want); missing != "" {
			t.Errorf("%s: kubectl %s as %s: no %q (in order) in\n%s", s.name, strings.Join(s.args, " "), s.identity, missing, out)
		}
		return out
	}
	admin := func(name string, args []string, want ...string) string {
		t.Helper()
		return run(step{name, "admin", args, want})
	}

	// node-2's kubelet is not running: say it is Ready, as its heartbeat would
	admin("node-2 Ready", []string{"patch", "node", "node-2", "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"` + time.Now().UTC().Format(time.RFC3339) + `"}]}}`})

	// the chain's step 1: the pod is stored, Pending, on no node
	admin("kubectl run", []string{"run", "nginx", "--image=nginx"}, "pod/nginx created")
	admin("kubectl get pod -o wide", []string{"get", "pod", "nginx", "-o", "wide"},
		"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES",
		"nginx", "0/1", "Pending", "0", "<none>", "<none>")

	// kubectl get -w: the pod's line, then the same pod on node-2 once the
	// scheduler (started only now) binds it
	watchCtx, stopWatch := context.WithTimeout(ctx, time.Minute)
	defer stopWatch()
	watch := exec.CommandContext(watchCtx, kubectl, "--kubeconfig", l.Kubeconfig("admin"), "get", "pod", "nginx", "-o", "wide", "-w")
	watchOut, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watch.Stderr = watch.Stdout
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(watchOut)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	next := func() string {
		t.Helper()
		l, ok := <-lines
		if !ok {
			t.Fatalf("kubectl get pod nginx -o wide -w ended; it printed:\n%s", strings.Join(seen, "\n"))
		}
		seen = append(seen, l)
		return l
	}
	if h := next(); !strings.HasPrefix(h, "NAME") || !strings.Contains(h, "NODE") {
		t.Fatalf("kubectl get -w's header: %q", h)
	}
	if f := strings.Fields(next()); len(f) < 7 || f[0] != "nginx" || f[2] != "Pending" || f[6] != "<none>" {
		t.Fatalf("kubectl get -w's first line: %q, want nginx Pending on node <none>", f)
	}

	_, scheduler := startComponent(t, state, "scheduler", "--kubeconfig", l.Kubeconfig("kube-scheduler"))
	startComponent(t, state, "controller-manager", "--kubeconfig", l.Kubeconfig("kube-controller-manager"))
	for {
		f := strings.Fields(next())
		if len(f) >= 7 && f[0] == "nginx" && f[6] == "node-2" {
			break
		}
	}
	stopWatch()
	watch.Wait()

	admin("kubectl get pods", []string{"get", "pods"}, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "nginx", "0/1", "Pending")

	// the Deployment chain: Deployment -> ReplicaSet test-<hash> -> pods
	admin("kubectl create deploy", []string{"create", "deploy", "test", "--image=nginx", "--replicas=2"}, "deployment.apps/test created")
	admin("2 replicas", []string{"wait", "--for=jsonpath={.status.replicas}=2", "deploy/test", "--timeout=60s"}, "deployment.apps/test condition met")
	out := admin("kubectl get deploy,rs,pods", []string{"get", "deploy,rs,pods"},
		"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "deployment.apps/test", "0/2", "2", "0",
		"NAME", "DESIRED", "CURRENT", "READY", "AGE", "replicaset.apps/test-", "2", "2", "0",
		"NAME", "READY", "STATUS", "RESTARTS", "AGE", "pod/nginx", "pod/test-")
	hash := admin("the hash", []string{"get", "rs", "-o", "jsonpath={.items[0].metadata.labels.pod-template-hash}"})
	if !strings.Contains(out, "replicaset.apps/test-"+hash+" ") || !strings.Contains(out, "pod/test-"+hash+"-") {
		t.Errorf("the ReplicaSet and its pods are not named test-%s(-...):\n%s", hash, out)
	}

	admin("kubectl describe pod", []string{"describe", "pod", "nginx"},
		"Name:", "nginx", "Namespace:", "default", "Node:", "node-2", "Status:", "Pending",
		"Containers:", "nginx:", "Image:", "nginx", "Conditions:", "PodScheduled", "True", "QoS Class:", "BestEffort",
		"Events:", "Normal", "Scheduled", "default-scheduler", "Successfully assigned default/nginx to node-2")

	admin("kubectl scale", []string{"scale", "deploy", "test", "--replicas=3"}, "deployment.apps/test scaled")
	admin("3 replicas", []string{"wait", "--for=jsonpath={.status.replicas}=3", "deploy/test", "--timeout=60s"}, "deployment.apps/test condition met")

	// kubectl delete marks nginx, prints its line, and waits until the pod
	// is gone: the kubelet of node-2 confirms with a delete of grace 0
	del := exec.CommandContext(ctx, kubectl, "--kubeconfig", l.Kubeconfig("admin"), "delete", "pod", "nginx")
	var delOut lockedBuffer
	del.Stdout, del.Stderr = &delOut, &delOut
	if err := del.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, func() bool { return strings.Contains(delOut.String(), `pod "nginx" deleted from default namespace`) },
		"kubectl delete pod nginx to print its deleted line", &delOut)
	run(step{"the kubelet's final delete", "node-2", []string{"delete", "pod", "nginx", "--grace-period=0", "--force"}, []string{`pod "nginx" force deleted`}})
	if err := del.Wait(); err != nil {
		t.Fatalf("kubectl delete pod nginx: %v\n%s", err, delOut.String())
	}

	// kubectl apply: create, then a changed manifest, then the same one
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	apply := func(replicas int, want string) {
		t.Helper()
		y := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx
`
		if err := os.WriteFile(manifest, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		admin("kubectl apply -f", []string{"apply", "-f", manifest}, want)
	}
	apply(1, "deployment.apps/web created")
	apply(2, "deployment.apps/web configured")
	apply(2, "deployment.apps/web unchanged")
	admin("the applied change", []string{"get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"}, "2")

	run(step{"kubectl auth can-i --list", "developer", []string{"auth", "can-i", "--list"}, []string{
		"Resources", "Non-Resource URLs", "Resource Names", "Verbs",
		"pods ", "[create update patch delete deletecollection get list watch]",
		"deployments.apps ", "selfsubjectaccessreviews.authorization.k8s.io", "[create]",
		"[/api]", "[get]"}})

	admin("kubectl get events", []string{"get", "events"}, "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE",
		"Normal", "Scheduled", "pod/nginx", "Successfully assigned default/nginx to node-2")
	events := admin("the events", []string{"get", "events"})
	for _, w := range []string{"replicaset/test-" + hash + " ", "Created pod: test-" + hash + "-",
		"deployment/test ", "Scaled up replica set test-" + hash + " from 0 to 2", "Scaled up replica set test-" + hash + " from 2 to 3"} {
		if !strings.Contains(events, w) {
			t.Errorf("kubectl get events: no %q in\n%s", w, events)
		}
	}

	out = admin("kubectl api-resources", []string{"api-resources"}, "NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")
	for _, w := range [][]string{{"pods", "po", "v1", "true", "Pod"}, {"deployments", "deploy", "apps/v1", "true", "Deployment"},
		{"replicasets", "rs", "apps/v1", "true", "ReplicaSet"}, {"nodes", "no", "v1", "false", "Node"}, {"events", "ev", "v1", "true", "Event"}} {
		if !hasRow(out, w) {
			t.Errorf("kubectl api-resources: no row %q in\n%s", w, out)
		}
	}

	admin("kubectl explain", []string{"explain", "pod.spec.containers"}, "KIND:", "Pod", "VERSION:", "v1",
		"FIELD: containers <[]Container>", "DESCRIPTION:", "List of containers belonging to the pod.",
		"FIELDS:", "image\t<string>", "name\t<string> -required-")

	if !strings.Contains(scheduler.String(), "bound default/nginx to node-2") {
		t.Errorf("podlab scheduler's log has no bind of nginx:\n%s", scheduler.String())
	}
}

// missingInOrder returns the first of want not found in out after the ones before
// it, or "" when out holds them all, in order.
func missingInOrder(out string, want []string) string {
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			return w
		}
		rest = rest[i+len(w):]
	}
	return ""
}

// hasRow reports whether a line of out is the fields of row.
func hasRow(out string, row []string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == strings.Join(row, " ") {
			return true
		}
	}
	return false
}
