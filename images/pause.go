package images

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PauseVersion is the pause image of Kubernetes v1.37: kubeadm's
// constants.PauseVersion, and build/pause/Makefile's TAG.
const PauseVersion = "3.10.2"

// PauseRef is the pause image's name in the demo layout. A runtime that
// pulls registry.k8s.io/pause:3.10.2 through the lab registry as a mirror
// asks it for GET /v2/pause/manifests/3.10.2?ns=registry.k8s.io: the
// repository path without the registry's host.
const PauseRef = "pause:" + PauseVersion

// PauseUID is the user the pause image runs as (its Dockerfile's USER
// 65535:65535): nobody, by number, since the image has no /etc/passwd.
const PauseUID = 65535

// pauseC is Kubernetes' build/pause/linux/pause.c (k8s.io/kubernetes
// v1.37.2), unchanged: see pause/README.md.
//
//go:embed pause/pause.c
var pauseC []byte

// PauseSource is the C source of the pause program.
func PauseSource() []byte { return bytes.Clone(pauseC) }

// BuildPause compiles pause.c into out as Kubernetes' build/pause/Makefile
// does: gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-podlab, then strip.
// Static, so that the image needs no libc. It needs gcc and a static libc
// (Debian's gcc and libc6-dev).
func BuildPause(ctx context.Context, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "podlab-pause-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "pause.c")
	if err := os.WriteFile(src, pauseC, 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v" + PauseVersion + "-podlab", "-o", abs, src},
		{"strip", abs},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building the pause program (%s): %w\n%s(install Debian's gcc and libc6-dev: make deps)", args[0], err, stderr.Bytes())
		}
	}
	return nil
}

// PauseOptions are the inputs of the pause recipe.
type PauseOptions struct {
	// Binary is the built pause program (see BuildPause).
	Binary string
}

// Pause assembles pause:3.10.2 as Kubernetes' build/pause/Dockerfile does:
// FROM scratch, ADD the static program as /pause, USER 65535:65535,
// ENTRYPOINT ["/pause"]. Its one process holds the pod's namespaces and
// reaps orphans (SIGCHLD), and exits on SIGINT or SIGTERM.
func Pause(ctx context.Context, opts PauseOptions) (v1.Image, error) {
	if opts.Binary == "" {
		return nil, fmt.Errorf("pause recipe: no pause binary given (build one with images.BuildPause)")
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("pause recipe: reading the pause binary: %w", err)
	}
	if len(bin) < 4 || string(bin[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("pause recipe: %s is not a Linux (ELF) executable", opts.Binary)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := v1.Config{
		Entrypoint: []string{"/pause"},
		User:       fmt.Sprintf("%d:%d", PauseUID, PauseUID),
		Labels: map[string]string{
			"org.opencontainers.image.title":  "pause",
			"org.opencontainers.image.source": "k8s.io/kubernetes v1.37.2 build/pause/linux/pause.c",
		},
	}
	return assemble(cfg, []layerStep{{
		createdBy: "ADD bin/pause-linux-" + goarch() + " /pause # gcc -Os -Wall -Werror -static pause.c && strip",
		comment:   "the pause program: it holds the pod's namespaces, reaps zombies, and exits on SIGINT or SIGTERM",
		entries:   []entry{fileEntry("pause", 0o755, bin)},
	}})
}
