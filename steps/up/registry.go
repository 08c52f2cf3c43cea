package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/podlab/podlab/steps/registry"
)

// Registry is the registry Up runs in-process when no mirror is given: the
// demo images of <state>/demo-images over the distribution API, on
// 127.0.0.1 and a port the kernel picked, used as the docker.io mirror.
type Registry struct {
	// URL is the mirror's URL, http://127.0.0.1:PORT.
	URL string
	// Images is the OCI layout it serves; BlobDir where its blobs are.
	Images  string
	BlobDir string
	Loaded  []registry.Loaded

	log  *lockedBuffer
	stop context.CancelFunc
	done chan error
}

// startRegistry serves the layout images in a goroutine until Stop.
func startRegistry(ctx context.Context, stateDir, images string) (*Registry, error) {
	if _, err := os.Stat(images); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist: run `make images` (it builds nginx and podlab/hello offline), or give a registry with --registry-mirror URL (PODLAB_REGISTRY_MIRROR)", ErrNoDemoImages, images)
	}
	ln, err := registry.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Registry{
		URL:     "http://" + ln.Addr().String(),
		Images:  images,
		BlobDir: registry.BlobDir(stateDir),
		log:     &lockedBuffer{},
		done:    make(chan error, 1),
	}
	ctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan []registry.Loaded, 1)
	go func() {
		r.done <- registry.Run(ctx, ln, images, registry.Options{BlobDir: r.BlobDir, Log: r.log},
			func(l []registry.Loaded) { ready <- l })
	}()
	select {
	case r.Loaded = <-ready:
		return r, nil
	case err := <-r.done:
		r.stop()
		if err == nil {
			err = errors.New("the registry stopped before it was ready")
		}
		return nil, fmt.Errorf("starting the in-process registry on %s with the images of %s: %w", r.URL, images, err)
	}
}

// Stop shuts the registry down and waits for it.
func (r *Registry) Stop() error {
	r.stop()
	return <-r.done
}

// requests returns the request lines logged after offset, and the new
// offset.
func (r *Registry) requests(offset int) ([]string, int) {
	s := r.log.String()
	if offset > len(s) {
		offset = len(s)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s[offset:]), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, len(s)
}

// lockedBuffer is a bytes.Buffer written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
