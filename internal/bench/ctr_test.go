package bench

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/statedir"
)

// ctrRounds: a ctr run takes about 100 ms, ten times a trivial runc run.
const ctrRounds = 15

// BenchmarkCtrRun runs podlab/hello:1.0 (`/hello --once`: it prints what
// it sees and exits) with podlab's runtime (podlab-runc run of the bundle
// podlab pull, unpack and spec made once) and with containerd's own client,
// `ctr run --rm`, against the lab containerd (Debian's 1.6, started here on
// its own state directory as `podlab containerd` starts it, the image
// imported into its k8s.io namespace and unpacked once), side by side. No
// target: the ratio says what containerd's way of running one container
// costs (README: Performance).
func BenchmarkCtrRun(b *testing.B) {
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root, for runc and containerd")
	}
	small := filepath.Join(testenv.RepoRoot(), "bin", "podlab-runc")
	podlab := filepath.Join(testenv.RepoRoot(), "bin", "podlab")
	for _, p := range []string{podlab, small} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(b, "bin/"+filepath.Base(p)+" (run make build)")
		}
	}
	bin, err := containerd.Find()
	if errors.Is(err, containerd.ErrNotInstalled) {
		testenv.Missing(b, "%v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	ctr := testenv.LookPath(b, "ctr")
	runc := testenv.Runc(b)
	ctx := context.Background()
	tmp := b.TempDir()

	// The image, as an OCI layout, served by the lab registry.
	hello := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), hello); err != nil {
		b.Fatal(err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: hello})
	if err != nil {
		b.Fatal(err)
	}
	layoutDir := filepath.Join(tmp, "layout")
	if err := images.WriteLayout(ctx, layoutDir, []images.Named{{Ref: images.HelloRef, Image: img}}); err != nil {
		b.Fatal(err)
	}
	ln, err := registry.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- registry.Run(rctx, ln, layoutDir, registry.Options{BlobDir: filepath.Join(tmp, "blobs")}, func([]registry.Loaded) { close(ready) })
	}()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		b.Fatalf("the registry stopped: %v", err)
	case <-time.After(time.Minute):
		b.Fatal("the registry never loaded its images")
	}
	mirror := "http://" + ln.Addr().String()

	// podlab's side: pull, unpack and spec once; each round runs the bundle.
	state := testenv.StateDir(b)
	ref := ln.Addr().String() + "/" + images.HelloRef
	bundle := filepath.Join(tmp, "hello-bundle")
	for _, args := range [][]string{
		{"pull", ref},
		{"unpack", ref, "--bundle", bundle},
		{"spec", ref, "--bundle", bundle, "--args", "--once"},
	} {
		if out, err := exec.Command(podlab, append([]string{"--state-dir", state}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// containerd's side: the lab containerd on a state directory of its own,
	// the image imported (and unpacked into its overlayfs snapshots) once.
	cstate := testenv.StateDir(b)
	cl, err := statedir.New(cstate)
	if err != nil {
		b.Fatal(err)
	}
	d, _, err := containerd.Start(ctx, containerd.FromLayout(cl, runc, "/usr/lib/cni"), bin, mirror, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = d.Stop(10 * time.Second)
		_, _ = containerd.Cleanup(context.Background(), cl.Containerd(), runc)
	})
	sock := cl.Containerd().Socket()
	if _, err := containerd.Ready(ctx, sock, time.Minute, d.Exited()); err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join(tmp, "hello.tar")
	if err := tarDir(layoutDir, archive); err != nil {
		b.Fatal(err)
	}
	ctrArgs := []string{"--address", sock, "--namespace", containerd.Namespace}
	if out, err := exec.Command(ctr, append(ctrArgs, "images", "import", archive)...).CombinedOutput(); err != nil {
		b.Fatalf("ctr images import: %v\n%s", err, out)
	}

	var ours, theirs []measurement
	for i := 0; i < ctrRounds; i++ {
		sides := []func(){
			func() {
				ours = append(ours, run(b, small, "--state-dir", state, "run", fmt.Sprintf("hello-%d", i), "--bundle", bundle))
			},
			func() {
				id := fmt.Sprintf("ctr-hello-%d", i)
				theirs = append(theirs, run(b, ctr, append(ctrArgs, "run", "--rm",
					"--cgroup", cl.CgroupRoot()+"/"+id, images.HelloRef, id, "/hello", "--once")...))
			},
		}
		for j := range sides {
			sides[(i+j)%len(sides)]()
		}
	}
	ratio := pairedRatio(theirs, ours)
	fmt.Printf("%-50s podlab %9.1f ms  other %9.1f ms  ratio %5.2f  (no target; ctr's time over podlab-runc's)\n",
		"run podlab/hello:1.0 once (vs ctr run --rm)", ms(typical(ours).wall), ms(typical(theirs).wall), ratio)
	b.Logf("each round (ms): podlab-runc %s; ctr %s", roundTimes(ours), roundTimes(theirs))
	b.ReportMetric(ratio, "ctr-over-podlab")
}

// tarDir writes dir's files (an OCI layout) into a tar archive at out, as
// `ctr images import` reads one.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
