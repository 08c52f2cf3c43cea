package bench

// The CRI socket's target: a pod's runtime work through podlab's CRI
// server (RunPodSandbox, the pull check as ImageStatus, CreateContainer,
// StartContainer, gRPC over the node's unix socket), with the image
// cached, costs at most 1.2× the same work done in-process by the
// kubelet's stages today (SandboxStage to StartStage, the time they spend
// writing status and Events to the API server taken out: a kubelet that is
// a CRI client still writes those). Both sides run the same runc and shim,
// without a pod network; each round alternates which goes first, and the
// target is checked on the median of the per-round ratios.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/statedir"
)

const (
	criRounds = 15
	criTarget = 1.2
)

func BenchmarkCRIPodStartup(b *testing.B) {
	f := setupStartup(b)
	ctx := context.Background()

	// node-2's runtime on its CRI socket, in this process, the image pulled once.
	l, err := statedir.New(f.cfg.StateDir)
	if err != nil {
		b.Fatal(err)
	}
	node := l.Node("node-2")
	sctx, stop := context.WithCancel(ctx)
	ln, _, err := cri.Listen(sctx, node.CRISocket())
	if err != nil {
		b.Fatal(err)
	}
	srv, _, err := cri.New(sctx, cri.Config{Node: node, Runtime: f.cfg.Runtime, Shim: f.cfg.Shim, Insecure: true})
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	conn, err := grpc.NewClient("unix://"+node.CRISocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	rt, img := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	b.Cleanup(func() {
		list, _ := rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		for _, sb := range list.GetItems() {
			if _, err := rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				b.Errorf("removing sandbox %s: %v", sb.Id, err)
			}
		}
		conn.Close()
		stop()
		<-served
	})
	pulled, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: f.ref}})
	if err != nil {
		b.Fatal(err)
	}
	logDir := filepath.Join(b.TempDir(), "logs")

	viaCRI := func(i int) time.Duration {
		pc := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("cri-%d", i), Namespace: "default", Uid: fmt.Sprintf("uid-cri-%d", i)},
			Hostname:     fmt.Sprintf("cri-%d", i),
			LogDirectory: filepath.Join(logDir, fmt.Sprintf("cri-%d", i)),
		}
		cc := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "web"},
			Image: &runtimeapi.ImageSpec{Image: f.ref}, LogPath: "web/0.log"}
		start := time.Now()
		sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
		if err != nil {
			b.Fatal(err)
		}
		st, err := img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: f.ref}})
		if err != nil || st.Image == nil || st.Image.Id != pulled.ImageRef {
			b.Fatalf("the image is not cached: %v %v", st, err)
		}
		cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cc, SandboxConfig: pc})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
		return took
	}
	inProcess := func(i int) time.Duration {
		name := fmt.Sprintf("inproc-%d", i)
		pod := f.createAndBind(b, name)
		var took time.Duration
		stage := func(what string, t time.Duration, rec kubelet.Recording, err error) {
			if err != nil {
				b.Fatalf("%s: %v", what, err)
			}
			took += t - rec.Took
		}
		sb, err := f.kubelet.SandboxStage(ctx, pod)
		stage("sandbox", sb.Took, sb.Recording, err)
		pr, err := f.kubelet.PullStage(ctx, pod, "web")
		stage("pull-check", pr.Took, pr.Recording, err)
		if pr.Pulled {
			b.Fatal("the image was pulled again; it should be cached")
		}
		ur, err := f.kubelet.UnpackStage(ctx, pod, "web")
		stage("unpack", ur.Took, ur.Recording, err)
		sr, err := f.kubelet.SpecStage(ctx, pod, "web")
		stage("spec", sr.Took, sr.Recording, err)
		cr, err := f.kubelet.CreateStage(ctx, pod, "web")
		stage("create", cr.Took, cr.Recording, err)
		st, err := f.kubelet.StartStage(ctx, pod, "web")
		stage("start", st.Took, st.Recording, err)
		f.remove(b, name)
		return took
	}

	var ours, theirs []measurement
	for i := 0; i < criRounds; i++ {
		sides := []func(){
			func() { ours = append(ours, measurement{wall: viaCRI(i)}) },
			func() { theirs = append(theirs, measurement{wall: inProcess(i)}) },
		}
		for j := range sides {
			sides[(i+j)%len(sides)]()
		}
	}
	compareWalls(b, "pod runtime work: CRI socket vs in-process stages", ours, theirs, "cri-ratio", criTarget, true)
	if _, err := os.Stat(node.CRISocket()); err != nil {
		b.Fatalf("the socket went away: %v", err)
	}
}
