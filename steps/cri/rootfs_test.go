package cri

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/moby/sys/mountinfo"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/spec"
	"github.com/podlab/podlab/steps/unpack"
)

// CreateContainer makes the rootfs through the node's snapshotter: with
// overlayfs, two containers of one image share the image's committed
// snapshots, each has an overlay mount with its own active snapshot, and
// RemoveContainer unmounts it and removes the active snapshot (the
// image's stay); with native, the rootfs is a plain directory.
func TestServer_CreateContainer_Snapshotter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		snap    unpack.Snapshotter
		mounted bool
	}{
		{"overlayfs", unpack.Overlayfs, true},
		{"native", unpack.Native, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			host := labRegistry(t)
			n := startNode(t, testenv.StateDir(t), func(c *Config) { c.Snapshotter = tc.snap })
			defer n.cleanupSandboxes(t)
			if got, _, err := n.srv.Snapshotter(); err != nil || got != tc.snap {
				t.Fatalf("Snapshotter() = %q %v, want %q", got, err, tc.snap)
			}
			pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/podlab/hello:1.0"}})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("snap")})
			if err != nil {
				t.Fatal(err)
			}
			var bundles []string
			var lowers [][]int
			for _, name := range []string{"one", "two"} {
				cfg := helloConfig(pulled.ImageRef)
				cfg.Metadata.Name = name
				cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				bundle := n.node.CRIBundle(sb.PodSandboxId, cr.ContainerId)
				rootfs := filepath.Join(bundle, spec.RootfsDir)
				mounted, err := mountinfo.Mounted(rootfs)
				if err != nil || mounted != tc.mounted {
					t.Fatalf("%s mounted = %v (%v), want %v", rootfs, mounted, err, tc.mounted)
				}
				if _, err := os.Stat(filepath.Join(rootfs, "hello")); err != nil {
					t.Fatalf("the image's /hello is not in the rootfs: %v", err)
				}
				bs, err := unpack.ReadBundleSnapshot(bundle)
				if err != nil {
					t.Fatal(err)
				}
				if (bs != nil) != tc.mounted {
					t.Fatalf("snapshot.json of %s: %+v, want one only with overlayfs", bundle, bs)
				}
				if bs != nil {
					if bs.Key != sb.PodSandboxId+"/"+cr.ContainerId {
						t.Errorf("the active snapshot's key is %q, want <sandbox>/<container>", bs.Key)
					}
					lowers = append(lowers, bs.Lowers)
				}
				bundles = append(bundles, bundle)
				if name == "one" {
					if _, err := n.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId}); err != nil {
						t.Fatal(err)
					}
					if _, err := os.Stat(bundle); err == nil {
						t.Fatalf("the bundle %s is left after RemoveContainer", bundle)
					}
					if bs != nil {
						if _, err := os.Stat(filepath.Join(bs.Snapshots, strconv.Itoa(bs.Active))); err == nil {
							t.Fatalf("the active snapshot %d is left after RemoveContainer", bs.Active)
						}
					}
				}
			}
			if tc.mounted && (len(lowers) != 2 || !slices.Equal(lowers[0], lowers[1])) {
				t.Fatalf("the two containers' lowers %v differ: the image's snapshots were not shared", lowers)
			}
			if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
				t.Fatal(err)
			}
			if tc.mounted {
				snaps, err := unpack.OpenSnapshots(n.node.SnapshotsDir())
				if err != nil {
					t.Fatal(err)
				}
				all, _ := snaps.List()
				for _, s := range all {
					if s.Kind == unpack.Active {
						t.Errorf("active snapshot %+v is left after RemovePodSandbox", s)
					}
				}
				if len(all) == 0 {
					t.Error("the image's committed snapshots went with the pod")
				}
			}
		})
	}
}

// RemoveImage removes the image's snapshots that no other stored image
// uses, as containerd's garbage collector does, but not those a
// container's rootfs stands on.
func TestServer_RemoveImage_Snapshots(t *testing.T) {
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t), func(c *Config) { c.Snapshotter = unpack.Overlayfs })
	defer n.cleanupSandboxes(t)
	ref := host + "/podlab/hello:1.0"
	committed := func() int {
		t.Helper()
		snaps, err := unpack.OpenSnapshots(n.node.SnapshotsDir())
		if err != nil {
			t.Fatal(err)
		}
		all, err := snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, s := range all {
			if s.Kind != unpack.Active {
				c++
			}
		}
		return c
	}
	pulled, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("gc")})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: helloConfig(pulled.ImageRef)})
	if err != nil {
		t.Fatal(err)
	}
	layers := committed()
	if layers == 0 {
		t.Fatal("no committed snapshot after CreateContainer with overlayfs")
	}
	if _, err := n.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != layers {
		t.Fatalf("RemoveImage with a container standing on its snapshots: %d committed snapshots left, want all %d", got, layers)
	}
	if _, err := n.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 0 {
		t.Errorf("RemoveImage of an image no container uses: %d committed snapshots left, want none", got)
	}
}
