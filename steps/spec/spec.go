// Package spec is the container runtime writing a bundle's OCI runtime spec,
// config.json: the file that tells runc which program to start, as which
// user, in which namespaces, under which cgroup limits and with which
// capabilities (the chain's step 11).
//
// The kubelet hands the CRI runtime (containerd, CRI-O) a container config
// made from the PodSpec: command, args, env, workingDir,
// resources.limits, securityContext. The runtime merges it with the image
// config (ENTRYPOINT, CMD, ENV, WORKDIR, USER) and its own defaults into
// config.json. Generate does the same, with containerd's own defaults
// (github.com/containerd/containerd/v2/pkg/oci), built from a flat list of
// small option functions, each of which can be read and tested alone.
//
// The seccomp filter is what securityContext.seccompProfile asks for
// (Options.Seccomp, or the WithSeccomp* options): containerd's default
// profile for RuntimeDefault, a profile file for Localhost, none for
// Unconfined and by default, as in Kubernetes.
//
// Everything an image could use to attack the host through its config is
// refused here, before any container exists: a working directory in /proc
// (CVE-2024-21626), ids out of range, users and groups the image does not
// define, and /etc/passwd links out of the rootfs.
package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const (
	// Namespace is the containerd namespace podlab generates specs in.
	Namespace = "podlab"

	// DefaultCgroupParent is the cgroup a container lives under when
	// Options.CgroupParent is empty: linux.cgroupsPath is
	// <parent>/<container-id>. podlab's commands always pass their state
	// directory's own cgroup root (steps/statedir), so that two state
	// directories never share cgroups.
	DefaultCgroupParent = "/podlab"

	// RootfsDir is the bundle's root filesystem, relative to the bundle, as
	// root.path says it: the bundle can be moved without rewriting the spec.
	RootfsDir = "rootfs"

	// ConfigFile is the name of the spec in the bundle.
	ConfigFile = "config.json"

	// DefaultPath is PATH when the image sets none (containerd's default).
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Options are what the kubelet's container config adds to the image config.
// The zero value runs the image as it was built.
type Options struct {
	// ContainerID names the container for runc and its cgroup; default: the
	// base name of the bundle directory.
	ContainerID string

	// CgroupParent is the cgroup the container goes under (a state
	// directory's cgroup root, /podlab-<hash>); default DefaultCgroupParent.
	CgroupParent string

	// Command replaces the image ENTRYPOINT, and the image CMD is then
	// ignored (a PodSpec's command).
	Command []string

	// Args replaces the image CMD (a PodSpec's args). With Args but no
	// Command, the process runs ENTRYPOINT + Args.
	Args []string

	// Env entries KEY=VALUE are added to the image's ENV, replacing the
	// image's value for the same KEY.
	Env []string

	// WorkingDir replaces the image WORKDIR; relative paths are taken from /.
	WorkingDir string

	// User replaces the image USER: name, uid, uid:gid, name:group or
	// uid:group; names are looked up in the rootfs' /etc/passwd and /etc/group.
	User string

	// Hostname is the container's hostname; default: the container id.
	Hostname string

	// CPU is a Kubernetes quantity ("500m", "1", "2.5"): the CFS quota per
	// 100ms period, and the cpu shares.
	CPU string

	// Memory is a Kubernetes quantity ("128Mi", "1G"): the memory cgroup limit.
	Memory string

	// Pids limits the number of processes and threads; 0 is no limit.
	Pids int64

	// Seccomp is the seccomp profile type, as a PodSpec's
	// securityContext.seccompProfile.type: "" or Unconfined (no filter, what
	// Kubernetes does by default), RuntimeDefault (containerd's default
	// profile) or Localhost (the profile in the file SeccompProfile).
	Seccomp string

	// SeccompProfile is the file of a Localhost profile: an OCI
	// LinuxSeccomp in JSON.
	SeccompProfile string
}

// Generate builds the runtime spec for the image config cfg and the bundle at
// bundleDir (which must hold the unpacked rootfs), with containerd's defaults
// and the given options. It only reads the bundle; Write stores the result.
func Generate(ctx context.Context, cfg *v1.ConfigFile, bundleDir string, opts Options) (*specs.Spec, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("generating spec: no image config")
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, fmt.Errorf("generating spec: %w: the image is for %q, runc runs linux images", ErrNotLinux, cfg.OS)
	}
	id := opts.ContainerID
	if id == "" {
		id = filepath.Base(filepath.Clean(bundleDir))
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(bundleDir, RootfsDir)
	if fi, err := os.Lstat(rootfs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is missing or not a directory", ErrNoRootfs, rootfs)
	}

	img := cfg.Config
	hostname := firstNonEmpty(opts.Hostname, id)
	s, err := oci.GenerateSpec(namespaces.WithNamespace(ctx, Namespace), nil, &containers.Container{ID: id},
		WithRelativeRootfs(),
		WithCgroupNamespace(),
		WithCgroupfsMount(),
		WithCgroupsPath(firstNonEmpty(opts.CgroupParent, DefaultCgroupParent), id),
		WithHostname(hostname),
		WithProcessArgs(img.Entrypoint, img.Cmd, opts.Command, opts.Args),
		WithEnv(img.Env, opts.Env),
		WithWorkingDir(rootfs, firstNonEmpty(opts.WorkingDir, img.WorkingDir)),
		WithUser(rootfs, firstNonEmpty(opts.User, img.User)),
		WithCPULimit(opts.CPU),
		WithMemoryLimit(opts.Memory),
		WithPidsLimit(opts.Pids),
		WithSeccomp(opts.Seccomp, opts.SeccompProfile), // after the capabilities: the default profile depends on them
	)
	if err != nil {
		return nil, fmt.Errorf("generating spec for container %s: %w", id, err)
	}
	return s, nil
}

// Write stores s as bundleDir/config.json, atomically (a temporary file in
// the bundle, synced, then renamed), mode 0600 since the environment may hold
// secrets. It returns the absolute path of the file.
func Write(bundleDir string, s *specs.Spec) (string, error) {
	if s == nil {
		return "", errors.New("writing spec: nil spec")
	}
	dir, err := filepath.Abs(bundleDir)
	if err != nil {
		return "", fmt.Errorf("writing spec: %w", err)
	}
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return "", fmt.Errorf("encoding spec: %w", err)
	}
	data = append(data, '\n')
	dst := filepath.Join(dir, ConfigFile)

	f, err := os.CreateTemp(dir, ".config.json-*")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	return dst, nil
}

// Read loads a bundle's config.json.
func Read(bundleDir string) (*specs.Spec, error) {
	s, err := oci.ReadSpec(filepath.Join(bundleDir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	return s, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
