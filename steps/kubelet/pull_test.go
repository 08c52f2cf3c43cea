package kubelet_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// callLog is the kubelet's CRI narration (its -v), safe to read while the
// client writes.
type callLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *callLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count is how many calls of method the kubelet made.
func (l *callLog) count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), "CRI "+method+" request: ")
}

// TestKubelet_PullThroughRuntime: the Pull stage asks the node's runtime
// over CRI (ImageStatus, then PullImage as the policy says), and what the
// stage reports (image id, repo digest, size) is what the runtime's
// ImageService answers. A Pull stage that pulled in-process would make no
// PullImage call, and fail here.
func TestKubelet_PullThroughRuntime(t *testing.T) {
	var calls callLog
	var rt *criremote.Client
	c := newCluster(t, func(cfg *kubelet.Config) {
		n := statedir.Layout{Dir: cfg.StateDir}.Node(apiserver.HostNode)
		var err error
		if rt, err = criremote.Dial(kubelet.DefaultRuntimeEndpoint(n), "", criremote.Options{Log: &calls}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		cfg.CRI = rt
	})
	ctx := context.Background()
	withPolicy := func(name string, policy corev1.PullPolicy) *corev1.Pod {
		p := helloPod(t, name)
		p.Spec.Containers[0].ImagePullPolicy = policy
		return c.create(t, p)
	}
	never := withPolicy("never", corev1.PullNever)
	ifNotPresent := withPolicy("ifnotpresent", corev1.PullIfNotPresent)
	always := withPolicy("always", corev1.PullAlways)

	tests := []struct {
		name     string
		pod      *corev1.Pod
		wantErr  error
		pulled   bool
		pullsNow int // PullImage calls the kubelet has made after this stage
	}{
		{name: "Never, not on the node", pod: never, wantErr: kubelet.ErrImageNeverPull, pullsNow: 0},
		{name: "IfNotPresent, not on the node", pod: ifNotPresent, pulled: true, pullsNow: 1},
		{name: "IfNotPresent, on the node", pod: ifNotPresent, pulled: false, pullsNow: 1},
		{name: "Always, on the node", pod: always, pulled: true, pullsNow: 2},
		{name: "Never, on the node", pod: never, pulled: false, pullsNow: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			statuses := calls.count("ImageStatus")
			res, err := c.kubelet.PullStage(ctx, tt.pod, "web")
			if calls.count("ImageStatus") == statuses {
				t.Errorf("no CRI ImageStatus call: the kubelet did not ask its runtime")
			}
			if got := calls.count("PullImage"); got != tt.pullsNow {
				t.Errorf("%d CRI PullImage calls so far, want %d", got, tt.pullsNow)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("PullStage: %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Pulled != tt.pulled {
				t.Errorf("pulled %v, want %v", res.Pulled, tt.pulled)
			}
			// What the stage reports is what the runtime's ImageService has.
			l, err := rt.Image.ListImages(ctx, &runtimeapi.ListImagesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var img *runtimeapi.Image
			for _, im := range l.Images {
				if im.Id == res.ImageRef {
					img = im
				}
			}
			if img == nil {
				t.Fatalf("the runtime's ListImages has no image %q: %v", res.ImageRef, l.Images)
			}
			if !slices.Contains(img.RepoDigests, res.ImageID) || int64(img.Size) != res.Size || res.Size == 0 {
				t.Errorf("stage: image %s, size %d; runtime: repo digests %v, size %d", res.ImageID, res.Size, img.RepoDigests, img.Size)
			}
			if p := c.get(t, tt.pod.Name); p.Status.ContainerStatuses[0].ImageID != res.ImageID {
				t.Errorf("status imageID %q, want %q", p.Status.ContainerStatuses[0].ImageID, res.ImageID)
			}
		})
	}
}

// TestKubelet_ImageInspectError: when the runtime's ImageStatus fails (its
// content store's index is unreadable), the kubelet cannot tell whether
// the image is there: the container waits in ImageInspectError with
// kubelet's "Failed to inspect image" message and the InspectFailed event,
// and nothing is pulled.
func TestKubelet_ImageInspectError(t *testing.T) {
	c := newCluster(t)
	index := filepath.Join(statedir.Layout{Dir: c.dir}.Node(apiserver.HostNode).ContentDir(), "index.json")
	if err := os.MkdirAll(filepath.Dir(index), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := helloPod(t, "inspect")
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	pod = c.create(t, pod)
	_, err := c.kubelet.PullStage(context.Background(), c.get(t, "inspect"), "")
	if !errors.Is(err, kubelet.ErrImageInspect) {
		t.Fatalf("the Pull stage: %v, want ErrImageInspect", err)
	}
	p := c.get(t, "inspect")
	w := p.Status.ContainerStatuses[0].State.Waiting
	wantMsg := `Failed to inspect image "` + pod.Spec.Containers[0].Image + `": `
	if w == nil || w.Reason != kubelet.ReasonImageInspectError || !strings.Contains(w.Message, wantMsg) {
		t.Fatalf("waiting %+v, want ImageInspectError %q...", w, wantMsg)
	}
	ev := c.events(t, pod)
	for _, want := range []string{"Warning InspectFailed: " + wantMsg, "Warning Failed: Error: ImageInspectError"} {
		if !hasEvent(ev, want) {
			t.Errorf("no event %q in %q", want, ev)
		}
	}
	if hasEvent(ev, "Normal Pulling") {
		t.Errorf("the kubelet pulled although it could not inspect: %q", ev)
	}
}
