package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// HelloRef is the demo image whose program reports what a container sees.
const HelloRef = "podlab/hello:1.0"

// HelloPackage is the Go package of the program in the hello image.
const HelloPackage = "github.com/podlab/podlab/images/hello"

// The user the hello image runs as: not root, and named in its /etc/passwd.
const (
	HelloUID  = 10001
	HelloUser = "app"
)

// HelloOptions are the inputs of the hello recipe.
type HelloOptions struct {
	// Binary is the built hello program (see BuildHello): a static Linux
	// executable, copied into the image as /hello.
	Binary string
}

// BuildHello compiles the hello program into out, static and reproducible:
// CGO_ENABLED=0 (no libc in the image), -trimpath and -buildvcs=false (no
// local paths or commit in the binary), -ldflags "-s -w" (no symbol tables).
// moduleDir is the podlab module's directory.
func BuildHello(ctx context.Context, moduleDir, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w", "-o", abs, HelloPackage)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the hello program (%s in %s): %w\n%s", HelloPackage, moduleDir, err, stderr.Bytes())
	}
	return nil
}

// Hello assembles podlab/hello:1.0 from the built hello program. Its four
// layers carry the lesson of unpacking: layer 2 adds /etc/motd and
// /srv/www/{index,old}.html, layer 4 deletes /etc/motd with the whiteout
// etc/.wh.motd and replaces /srv/www with the opaque whiteout
// srv/www/.wh..wh..opq plus a new index.html. Unpacked in order, the rootfs
// has no /etc/motd and /srv/www holds only the new index.html.
func Hello(ctx context.Context, opts HelloOptions) (v1.Image, error) {
	if opts.Binary == "" {
		return nil, fmt.Errorf("hello recipe: no hello binary given (build one with images.BuildHello)")
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("hello recipe: reading the hello binary: %w", err)
	}
	if len(bin) < 4 || string(bin[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("hello recipe: %s is not a Linux (ELF) executable", opts.Binary)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	cfg := v1.Config{
		Entrypoint: []string{"/hello"},
		Cmd:        []string{"--listen", ":8080"},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"GREETING=Hello from podlab/hello",
		},
		WorkingDir:   "/srv/www",
		User:         fmt.Sprintf("%d:%d", HelloUID, HelloUID),
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "podlab/hello",
			"org.opencontainers.image.description": "prints its hostname, PID, user and cgroup limits, then serves them on :8080",
		},
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:podlab demo app:/nonexistent:/sbin/nologin\n", HelloUser, HelloUID, HelloUID)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", HelloUser, HelloUID)

	return assemble(cfg, []layerStep{
		{
			createdBy: "ADD base.tar / # /etc/passwd, /etc/group, /tmp",
			comment: fmt.Sprintf("base: the users root and %s (uid %d) in /etc/passwd and /etc/group, so that the runtime and the program can name uid %d; /tmp",
				HelloUser, HelloUID, HelloUID),
			entries: []entry{
				dirEntry("etc", 0o755),
				textEntry("etc/passwd", passwd),
				textEntry("etc/group", group),
				dirEntry("tmp", 0o1777),
			},
		},
		{
			createdBy: "COPY motd index.html old.html / # /etc/motd, /srv/www/index.html, /srv/www/old.html",
			comment:   "version 1 of the site, and a /etc/motd: layer 4 deletes /etc/motd (whiteout) and replaces /srv/www (opaque whiteout)",
			entries: []entry{
				textEntry("etc/motd", "This /etc/motd is deleted by a later layer: you should not see it in a rootfs.\n"),
				dirEntry("srv", 0o755),
				dirEntry("srv/www", 0o755),
				textEntry("srv/www/index.html", "<h1>podlab/hello, site version 1</h1>\n"),
				textEntry("srv/www/old.html", "<p>old.html is hidden by layer 4's opaque whiteout.</p>\n"),
			},
		},
		{
			createdBy: "COPY hello /hello # CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' ./images/hello",
			comment:   "the program: a static Go binary, so the image needs no libc, shell or loader",
			entries:   []entry{fileEntry("hello", 0o755, bin)},
		},
		{
			createdBy: "RUN rm /etc/motd && rm -rf /srv/www && mkdir /srv/www && echo ... > /srv/www/index.html",
			comment:   "deletions are files too: etc/.wh.motd is a whiteout that deletes /etc/motd; srv/www/.wh..wh..opq is an opaque whiteout that hides everything lower layers put in /srv/www (old.html, the old index.html); then the new index.html",
			entries: []entry{
				whiteoutEntry("etc/motd"),
				dirEntry("srv/www", 0o755),
				opaqueEntry("srv/www"),
				textEntry("srv/www/index.html", "<h1>podlab/hello, site version 2</h1>\n"),
			},
		},
	})
}
