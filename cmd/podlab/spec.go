package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/last"
	"github.com/podlab/podlab/steps/spec"
	"github.com/podlab/podlab/steps/statedir"
)

var specCommand = &cli.Command{
	Name:      "spec",
	Usage:     "write the bundle's OCI runtime spec, config.json, from the image config and the Pod's settings (step 11)",
	ArgsUsage: "[--bundle DIR] [--image REF] [--command X]... [--args X]... [--env K=V]...",
	Description: `An OCI bundle is a directory with two things in it: rootfs/, the container's
files (made by "podlab unpack"), and config.json, the OCI runtime spec. runc
reads nothing else: config.json says which program to start (process.args),
with which environment, working directory and uid/gid, under which hostname,
in which new namespaces (pid, net, ipc, uts, mount, cgroup), in which cgroup
(linux.cgroupsPath) with which limits (linux.resources), with which
capabilities, and which paths of /proc and /sys to hide.

In Kubernetes, the kubelet turns a PodSpec's container (command, args, env,
workingDir, resources.limits, securityContext) into a CRI CreateContainer
request; the CRI runtime (containerd, CRI-O) merges it with the image config
(ENTRYPOINT, CMD, ENV, WORKDIR, USER) and its own safe defaults, and writes
config.json into the container's bundle. This command does that, with
containerd's own defaults:

  --command replaces the image ENTRYPOINT, and the image CMD is then ignored
  --args replaces the image CMD (alone: ENTRYPOINT + args)
  --env K=V adds to the image ENV or overrides it
  --cpu 500m becomes a CFS quota of 50000µs per 100000µs period
  --memory 128Mi becomes the memory cgroup limit (the OOM killer's line)
  --pids 100 becomes pids.max
  --seccomp RuntimeDefault becomes linux.seccomp, containerd's default
    system call filter (a PodSpec's securityContext.seccompProfile);
    --seccomp Localhost --seccomp-profile FILE loads a profile file;
    without --seccomp, or with Unconfined, there is no filter (Kubernetes'
    default too)

Each --command, --args and --env is ONE element, as in a PodSpec list: commas
are not split. The image's config is read from the content store ("podlab
pull" first); names in --user are looked up in the bundle's rootfs/etc/passwd
and /etc/group. Hostile image configs (a working directory in /proc, ids out
of range, unknown users, no command at all) are refused here, before any
container exists. --explain tells, part by part, what the kernel will do.

Without --bundle and --image it writes the spec of the bundle unpacked last
(podlab unpack), for the image it was unpacked from, and says so; with
--image alone, into that image's bundle, <state-dir>/bundles/<name>.

Example:
  podlab pull nginx
  podlab unpack
  podlab spec --memory 128Mi --cpu 500m --explain
  podlab runc run -d

or in full:
  podlab unpack nginx --bundle $PODLAB_STATE_DIR/bundles/web
  podlab spec --bundle $PODLAB_STATE_DIR/bundles/web --image nginx
  podlab runc run web --bundle $PODLAB_STATE_DIR/bundles/web`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "bundle", Usage: "the bundle `DIR` (holds rootfs/ from podlab unpack); config.json is written there"},
		&cli.StringFlag{Name: "image", Usage: "the image `REF` in the content store whose config to use (or give it as the argument)"},
		&cli.StringSliceFlag{Name: "command", Usage: "replaces the image ENTRYPOINT (and drops CMD); repeat for each element, like a PodSpec's command"},
		&cli.StringSliceFlag{Name: "args", Usage: "replaces the image CMD; repeat for each element, like a PodSpec's args"},
		&cli.StringSliceFlag{Name: "env", Usage: "`KEY=VALUE` added to the image ENV, overriding it; repeat for more"},
		&cli.StringFlag{Name: "workdir", Usage: "working `DIR` in the container, replacing the image WORKDIR"},
		&cli.StringFlag{Name: "user", Usage: "`USER` to run as: name, uid, uid:gid, name:group or uid:group (replaces the image USER)"},
		&cli.StringFlag{Name: "hostname", Usage: "the container's hostname (default: the container id)"},
		&cli.StringFlag{Name: "cpu", Usage: "CPU limit, a Kubernetes `QUANTITY` such as 500m or 1"},
		&cli.StringFlag{Name: "memory", Usage: "memory limit, a Kubernetes `QUANTITY` such as 128Mi"},
		&cli.Int64Flag{Name: "pids", Usage: "most processes and threads in the container (0: no limit)"},
		&cli.StringFlag{Name: "seccomp", Usage: "seccomp profile `TYPE`: RuntimeDefault (containerd's filter), Localhost (with --seccomp-profile) or Unconfined (no filter, the default)"},
		&cli.StringFlag{Name: "seccomp-profile", Usage: "with --seccomp Localhost: the profile `FILE`, an OCI LinuxSeccomp in JSON"},
		&cli.StringFlag{Name: "id", Usage: "container `ID` for runc and the cgroup /podlab-<hash>/ID (default: the bundle directory's name)"},
		&cli.BoolFlag{Name: "explain", Usage: "explain what each part of the spec makes the kernel do"},
		insideCreateFlag(), namespaceFlag(), containerFlag(),
	},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, "spec")
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		ref, bundle, err := specTarget(c, dir)
		if err != nil {
			return err
		}
		cfg, err := imageConfig(c, ref)
		if err != nil {
			return err
		}
		s, err := spec.Generate(c.Context, cfg, bundle, spec.Options{
			ContainerID:    c.String("id"),
			CgroupParent:   statedir.Layout{Dir: dir}.CgroupRoot(),
			Command:        c.StringSlice("command"),
			Args:           c.StringSlice("args"),
			Env:            c.StringSlice("env"),
			WorkingDir:     c.String("workdir"),
			User:           c.String("user"),
			Hostname:       c.String("hostname"),
			CPU:            c.String("cpu"),
			Memory:         c.String("memory"),
			Pids:           c.Int64("pids"),
			Seccomp:        c.String("seccomp"),
			SeccompProfile: c.String("seccomp-profile"),
		})
		if errors.Is(err, spec.ErrNoRootfs) {
			return fmt.Errorf("%w (run `podlab unpack %s --bundle %s` first)", err, ref, bundle)
		}
		if err != nil {
			return err
		}
		path, err := spec.Write(bundle, s)
		if err != nil {
			return err
		}
		recordLast(c, func(r *last.Record) { r.Spec, r.SpecID = bundle, containerID(s) })
		printSpec(c.App.Writer, path, bundle, ref, s)
		if c.Bool("explain") {
			fmt.Fprintln(c.App.Writer)
			if err := spec.Explain(c.App.Writer, s); err != nil {
				return err
			}
		}
		fmt.Fprintf(c.App.Writer, "\nNext: podlab runc create   (or in full: podlab runc create %s --bundle %s), or podlab runc run -d\n", containerID(s), bundle)
		return nil
	},
}

// specTarget is the image and the bundle podlab spec works on: as given,
// else the bundle unpacked last and its image (saying so), else the
// default bundle of the image given. The bundle is absolute.
func specTarget(c *cli.Context, dir string) (ref, bundle string, err error) {
	ref, bundle = c.String("image"), c.String("bundle")
	if ref == "" {
		ref = c.Args().First()
	}
	if ref == "" || bundle == "" {
		rec, err := loadLast(c)
		if err != nil {
			return "", "", err
		}
		abs, _ := filepath.Abs(bundle)
		switch {
		case ref == "" && bundle == "" && rec.Unpacked == "":
			return "", "", fmt.Errorf("no bundle given, and none unpacked yet in %s: unpack one first (`podlab pull nginx`, then `podlab unpack`), or name both: podlab spec --bundle DIR --image REF", dir)
		case ref == "" && bundle == "":
			if !pathExists(filepath.Join(rec.Unpacked, "rootfs")) {
				return "", "", fmt.Errorf("%w: %s, the bundle unpacked last, is gone (removed?): unpack it again: podlab unpack %s", spec.ErrNoRootfs, inState(dir, rec.Unpacked), rec.UnpackedImage)
			}
			ref, bundle = rec.UnpackedImage, rec.Unpacked
			fmt.Fprintf(c.App.Writer, "writing the spec of %s (the bundle unpacked last, from image %s)\n", inState(dir, bundle), ref)
		case ref == "" && abs == rec.Unpacked:
			ref = rec.UnpackedImage
			fmt.Fprintf(c.App.Writer, "using image %s (the image %s was unpacked from)\n", ref, inState(dir, abs))
		case ref == "":
			return "", "", fmt.Errorf("no --image given for %s: name the image its rootfs came from: podlab spec --bundle %s --image REF", bundle, bundle)
		default: // an image but no bundle: the bundle podlab unpack makes for it
			bundle = defaultBundle(dir, ref)
			fmt.Fprintf(c.App.Writer, "No --bundle given: writing the spec into %s\n", bundle)
		}
	}
	bundle, err = filepath.Abs(bundle)
	return ref, bundle, err
}

// imageConfig reads the image config of ref from the content store.
func imageConfig(c *cli.Context, ref string) (*v1.ConfigFile, error) {
	store, err := contentStore(c)
	if err != nil {
		return nil, err
	}
	img, err := store.Image(ref) // a pull.ErrImageNotFound says to run `podlab pull REF`
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config of %s: %w", ref, err)
	}
	return cfg, nil
}

// containerID is the id the spec was generated for: the last element of
// its cgroupsPath (/podlab-<hash>/<id>).
func containerID(s *specs.Spec) string {
	if s.Linux == nil {
		return ""
	}
	return filepath.Base(s.Linux.CgroupsPath)
}

func printSpec(w io.Writer, path, bundle, ref string, s *specs.Spec) {
	p := s.Process
	fmt.Fprintf(w, "Wrote the OCI runtime spec of container %s (image %s)\n", containerID(s), ref)
	fmt.Fprintf(w, "  config.json  %s\n", path)
	fmt.Fprintf(w, "  rootfs       %s (root.path %q)\n\n", filepath.Join(bundle, s.Root.Path), s.Root.Path)

	fmt.Fprintf(w, "  args         %q\n", p.Args)
	for i, e := range p.Env {
		label := ""
		if i == 0 {
			label = "env"
		}
		fmt.Fprintf(w, "  %-12s %s\n", label, e)
	}
	fmt.Fprintf(w, "  cwd          %s\n", p.Cwd)
	user := fmt.Sprintf("uid %d, gid %d", p.User.UID, p.User.GID)
	if len(p.User.AdditionalGids) > 0 {
		user += fmt.Sprintf(", groups %v", p.User.AdditionalGids)
	}
	fmt.Fprintf(w, "  user         %s\n", user)
	fmt.Fprintf(w, "  hostname     %s\n", s.Hostname)
	var ns []string
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, string(n.Type))
	}
	fmt.Fprintf(w, "  namespaces   %s (each new)\n", strings.Join(ns, ", "))
	fmt.Fprintf(w, "  limits       %s\n", limits(s.Linux.Resources))
	fmt.Fprintf(w, "  cgroupsPath  %s\n", s.Linux.CgroupsPath)
	if c := p.Capabilities; c != nil {
		fmt.Fprintf(w, "  caps         %d in the bounding set, %d inheritable; noNewPrivileges %v\n",
			len(c.Bounding), len(c.Inheritable), p.NoNewPrivileges)
	}

	fmt.Fprintf(w, "  seccomp      %s\n", seccompSummary(s))
	fmt.Fprintf(w, "\nIn Kubernetes: the kubelet's PodSpec command/args/env/workingDir/resources.limits/\n")
	fmt.Fprintf(w, "securityContext become this file, via the CRI runtime (containerd writes it to\n")
	fmt.Fprintf(w, "/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json).\n")
	fmt.Fprintf(w, "Open it: %s\n", path)
}

func limits(r *specs.LinuxResources) string {
	var out []string
	if r != nil && r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil {
		out = append(out, fmt.Sprintf("cpu quota %dµs per %dµs (%.3g CPUs)", *r.CPU.Quota, *r.CPU.Period, float64(*r.CPU.Quota)/float64(*r.CPU.Period)))
	}
	if r != nil && r.Memory != nil && r.Memory.Limit != nil {
		out = append(out, fmt.Sprintf("memory %d bytes", *r.Memory.Limit))
	}
	if r != nil && r.Pids != nil && r.Pids.Limit != nil {
		out = append(out, fmt.Sprintf("pids %d", *r.Pids.Limit))
	}
	if len(out) == 0 {
		return "none (no --cpu, --memory, --pids)"
	}
	return strings.Join(out, ", ")
}

func seccompSummary(s *specs.Spec) string {
	if s.Linux == nil || s.Linux.Seccomp == nil {
		return "none: every system call is open (--seccomp RuntimeDefault adds containerd's filter)"
	}
	f := s.Linux.Seccomp
	return fmt.Sprintf("a filter of %d rules, default action %s", len(f.Syscalls), f.DefaultAction)
}
