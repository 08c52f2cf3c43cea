package kubelet

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestComputeStatus_ContainerIDHasTheRuntimeName: the status's
// containerIDs are <runtime name>://<id>, the name the observed state
// carries (containerd's here), its current run's and its last
// termination's; a status an earlier kubelet wrote (runc://) still names
// the same run, so its startedAt is kept.
func TestComputeStatus_ContainerIDHasTheRuntimeName(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := metav1.NewTime(now.Add(-time.Minute))
	k := &Kubelet{cfg: Config{Now: func() time.Time { return now }}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}, RestartPolicy: corev1.RestartPolicyAlways}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ContainerID: "runc://new",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	st := &PodState{Now: now, RuntimeName: "containerd", Sandbox: Sandbox{Ready: true}, Containers: []ContainerState{{
		Name: "web", Image: "nginx",
		Runs: []Run{
			{ID: "old", RestartCount: 0, State: RunExited, Exit: &Exit{Code: 1, ExitedAt: now.Add(-2 * time.Minute)}},
			{ID: "new", RestartCount: 1, State: RunRunning},
		},
	}}}
	s := k.ComputeStatus(pod, st)
	if len(s.ContainerStatuses) != 1 {
		t.Fatalf("container statuses: %+v", s.ContainerStatuses)
	}
	cs := s.ContainerStatuses[0]
	if cs.ContainerID != "containerd://new" {
		t.Errorf("containerID %q, want containerd://new", cs.ContainerID)
	}
	if term := cs.LastTerminationState.Terminated; term == nil || term.ContainerID != "containerd://old" {
		t.Errorf("lastState.terminated %+v, want containerID containerd://old", term)
	}
	if cs.State.Running == nil || !cs.State.Running.StartedAt.Equal(&started) {
		t.Errorf("state %+v, want running since %s (the status's, which names the same run)", cs.State, started)
	}
}

// versionOnly is a runtime that answers Version, counting the calls.
type versionOnly struct {
	runtimeapi.RuntimeServiceClient
	name  string
	err   error
	calls int
}

func (v *versionOnly) Version(context.Context, *runtimeapi.VersionRequest, ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	v.calls++
	if v.err != nil {
		return nil, v.err
	}
	return &runtimeapi.VersionResponse{RuntimeName: v.name}, nil
}

// TestRuntimeName_AskedOnce: the kubelet asks Version for the runtime's
// name once and keeps it; a failed call, or no name, is an error that
// says what was being asked, and is asked again.
func TestRuntimeName_AskedOnce(t *testing.T) {
	ctx := context.Background()
	rt := &versionOnly{err: errors.New("connection refused")}
	var n runtimeName
	if _, err := n.get(ctx, rt); err == nil {
		t.Fatal("Version failed: want an error")
	}
	rt.err = nil
	if _, err := n.get(ctx, rt); err == nil {
		t.Fatal("Version answered no runtime_name: want an error")
	}
	rt.name = "podlab"
	for range 3 {
		if got, err := n.get(ctx, rt); err != nil || got != "podlab" {
			t.Fatalf("runtime name %q, %v; want podlab", got, err)
		}
	}
	if rt.calls != 3 {
		t.Errorf("Version called %d times, want 3 (two failures, then once)", rt.calls)
	}
	n.remember("containerd")
	if got, _ := n.get(ctx, rt); got != "containerd" {
		t.Errorf("after the node status's Version answered containerd: %q", got)
	}
}
