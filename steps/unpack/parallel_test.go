package unpack

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// readGate counts the layer blobs being read at once (from a stream's
// first Read to its Close). Once armed, a stream's first Read waits until
// want streams are open together, or fails after a while: layers read one
// after another never get there.
type readGate struct {
	mu      sync.Mutex
	armed   bool
	want    int
	open    int
	most    int
	failed  error         // once the wait has timed out, every later wait fails at once
	reached chan struct{} // closed when open first reaches want
}

func newReadGate(want int) *readGate { return &readGate{want: want, reached: make(chan struct{})} }

func (g *readGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

// enter counts one more stream being read and waits for want of them.
func (g *readGate) enter() error {
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return nil
	}
	g.open++
	g.most = max(g.most, g.open)
	if g.open == g.want {
		select {
		case <-g.reached:
		default:
			close(g.reached)
		}
	}
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		return failed
	}
	select {
	case <-g.reached:
		return nil
	case <-time.After(10 * time.Second):
		g.mu.Lock()
		defer g.mu.Unlock()
		g.failed = fmt.Errorf("after 10s, %d layer blobs were being read at once, want %d: the layers are not applied in parallel", g.open, g.want)
		return g.failed
	}
}

func (g *readGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		g.open--
	}
}

// gatedLayer is a layer whose compressed stream goes through the gate: the
// narrow part of v1.Layer that the snapshotter reads.
type gatedLayer struct {
	v1.Layer
	gate *readGate
}

func (l gatedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &gatedReader{rc: rc, gate: l.gate}, nil
}

type gatedReader struct {
	rc      io.ReadCloser
	gate    *readGate
	entered bool
	err     error
}

func (r *gatedReader) Read(p []byte) (int, error) {
	if !r.entered {
		r.entered = true
		if r.err = r.gate.enter(); r.err != nil {
			return 0, r.err
		}
	}
	if r.err != nil {
		return 0, r.err
	}
	return r.rc.Read(p)
}

func (r *gatedReader) Close() error {
	if r.entered {
		r.entered = false
		r.gate.leave()
	}
	return r.rc.Close()
}

// The overlayfs snapshotter applies an image's layers in parallel, as
// many at once as there are CPUs (at least two here): each layer's blob is
// held at its first read until that many are being read together, which
// never happens when they are applied one after another (the unpack then
// fails with the gate's error). The snapshots come out whole and in order
// all the same.
func TestSnapshots_LayersUnpackInParallel(t *testing.T) {
	snaps := newSnapshots(t)
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	tests := []struct {
		name   string
		layers int
	}{
		{"two layers", 2},
		{"five layers", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := min(runtime.GOMAXPROCS(0), tt.layers)
			gate := newReadGate(want)
			var layers []v1.Layer
			for i := range tt.layers {
				l := gz(t, dir("etc/"), file(fmt.Sprintf("etc/%s-%d", tt.name, i), fmt.Sprintf("layer %d\n", i)))
				layers = append(layers, gatedLayer{Layer: l, gate: gate})
			}
			img := imageOf(t, layers...)
			if _, err := img.Manifest(); err != nil { // digests computed before the gate counts
				t.Fatal(err)
			}
			gate.arm()
			results, bundles := overlayBundles(t, snaps, img, "c")
			if gate.most < want {
				t.Fatalf("at most %d layer blobs were read at once, want %d", gate.most, want)
			}
			res := results[0]
			if len(res.Layers) != tt.layers {
				t.Fatalf("%d layer results, want %d", len(res.Layers), tt.layers)
			}
			for i, lr := range res.Layers {
				if lr.Reused || lr.Snapshot == 0 {
					t.Errorf("layer %d: %+v, want a new snapshot", i, lr)
				}
				if i > 0 && lr.Snapshot <= res.Layers[i-1].Snapshot {
					t.Errorf("layer %d is snapshot %d, under layer %d's %d: want them numbered bottom first", i, lr.Snapshot, i-1, res.Layers[i-1].Snapshot)
				}
				got, err := os.ReadFile(filepath.Join(bundles[0], "rootfs", "etc", fmt.Sprintf("%s-%d", tt.name, i)))
				if err != nil || string(got) != fmt.Sprintf("layer %d\n", i) {
					t.Errorf("etc/%s-%d in the rootfs: %q %v, want layer %d's", tt.name, i, got, err, i)
				}
			}
			t.Logf("%d layers, at most %d read at once (GOMAXPROCS %d)", tt.layers, gate.most, runtime.GOMAXPROCS(0))
		})
	}
}
