package cri

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// PodSandboxStats, the single-sandbox RPC (the kubelet's summary API asks
// ListPodSandboxStats; crictl statsp -id asks this one): for a running
// sandbox with a running container, the sandbox's id and metadata, the
// container's stats by its id, and the sandbox's memory as the sum of its
// containers'; for a sandbox that does not exist, NotFound naming the id,
// as containerd answers.
func TestServer_PodSandboxStats(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t))
	defer n.cleanupSandboxes(t)
	pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/podlab/hello:1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("stats")})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig(pulled.ImageRef)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	// The container's cgroup shows memory once its process has run a little.
	waitFor(t, 10*time.Second, "memory usage in ContainerStats", func() bool {
		st, err := n.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cr.ContainerId})
		return err == nil && st.Stats.Memory != nil && st.Stats.Memory.UsageBytes.GetValue() > 0
	})

	const unknown = "0123456789abcdef"
	for _, tc := range []struct {
		name string
		id   string
		code codes.Code
		says string
	}{
		{"a running sandbox with a container", sb.PodSandboxId, codes.OK, ""},
		{"the same sandbox by a short id", sb.PodSandboxId[:13], codes.OK, ""},
		{"an unknown sandbox", unknown, codes.NotFound, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := n.rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: tc.id})
			if status.Code(err) != tc.code {
				t.Fatalf("PodSandboxStats(%s): %v (code %s), want code %s", tc.id, err, status.Code(err), tc.code)
			}
			if tc.code != codes.OK {
				if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.says) || !strings.Contains(msg, "not found") {
					t.Fatalf("PodSandboxStats(%s): message %q, want it to name %q and say not found", tc.id, msg, tc.says)
				}
				if resp != nil {
					t.Errorf("PodSandboxStats(%s) answered %v with its error", tc.id, resp)
				}
				return
			}
			st := resp.GetStats()
			if a := st.GetAttributes(); a.GetId() != sb.PodSandboxId || a.GetMetadata().GetName() != "stats" || a.GetMetadata().GetUid() != "uid-stats" {
				t.Fatalf("attributes %v, want sandbox %s (stats, uid-stats)", a, sb.PodSandboxId)
			}
			lx := st.GetLinux()
			if len(lx.GetContainers()) != 1 {
				t.Fatalf("%d container stats, want 1 (%v)", len(lx.GetContainers()), lx.GetContainers())
			}
			c := lx.Containers[0]
			if c.GetAttributes().GetId() != cr.ContainerId || c.GetAttributes().GetMetadata().GetName() != "hello" {
				t.Errorf("container attributes %v, want %s (hello)", c.GetAttributes(), cr.ContainerId)
			}
			if c.GetMemory().GetUsageBytes().GetValue() == 0 || c.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 {
				t.Errorf("the container's stats %v, want memory and CPU used", c)
			}
			if lx.GetMemory().GetUsageBytes().GetValue() < c.GetMemory().GetUsageBytes().GetValue() {
				t.Errorf("the sandbox's memory %d is less than its container's %d", lx.GetMemory().GetUsageBytes().GetValue(), c.GetMemory().GetUsageBytes().GetValue())
			}
			if lx.GetCpu().GetTimestamp() == 0 || lx.GetMemory().GetTimestamp() == 0 {
				t.Errorf("the sandbox's CPU and memory stats have no timestamp: %v", lx)
			}
		})
	}
}
