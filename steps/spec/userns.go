package spec

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// A user namespace gives the container its own table of user and group
// ids: linux.uidMappings and linux.gidMappings say which range of the
// host's ids the container's ids 0, 1, 2, ... stand for. With the mapping
// "0 65536 65536", the container's root (uid 0) is host uid 65536, which
// owns nothing on the host; its capabilities hold only over the namespaces
// its user namespace owns (its own network, mounts, hostname), never over
// the host's files or devices.

// WithUserNamespace gives the container a user namespace with the uid and
// gid mappings given: a new one when nsPath is "", else the one pinned at
// nsPath (a pod's, made at sandbox time), whose mappings must be these
// (runc checks). Each mapping needs a length of at least 1 and must fit in
// 32 bits; ErrInvalidIDMapping otherwise.
func WithUserNamespace(nsPath string, uids, gids []specs.LinuxIDMapping) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if err := validateMappings("uid", uids); err != nil {
			return err
		}
		if err := validateMappings("gid", gids); err != nil {
			return err
		}
		if nsPath != "" && !path.IsAbs(nsPath) {
			return fmt.Errorf("%w: user namespace path %q must be absolute", ErrInvalidIDMapping, nsPath)
		}
		setLinux(s)
		s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(ns specs.LinuxNamespace) bool { return ns.Type == specs.UserNamespace })
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace, Path: nsPath})
		s.Linux.UIDMappings = slices.Clone(uids)
		s.Linux.GIDMappings = slices.Clone(gids)
		return nil
	}
}

// WithIDMappedMounts idmaps the bind mounts at the destinations given with
// the container's own mappings (mount option "idmap", runc 1.2 and later):
// a file the host's uid 0 owns shows in the container as owned by the
// container's root, and what the container's root writes there is stored
// as uid 0. It needs WithUserNamespace first; a destination with no bind
// mount is left alone.
func WithIDMappedMounts(destinations ...string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil || len(s.Linux.UIDMappings) == 0 || len(s.Linux.GIDMappings) == 0 {
			return fmt.Errorf("%w: idmapped mounts take the container's user namespace mappings, and the spec has none", ErrInvalidIDMapping)
		}
		for i := range s.Mounts {
			m := &s.Mounts[i]
			if m.Type != "bind" && !slices.Contains(m.Options, "bind") && !slices.Contains(m.Options, "rbind") {
				continue
			}
			if !slices.Contains(destinations, path.Clean(m.Destination)) {
				continue
			}
			if !slices.Contains(m.Options, "idmap") && !slices.Contains(m.Options, "ridmap") {
				m.Options = append(m.Options, "idmap")
			}
			m.UIDMappings = slices.Clone(s.Linux.UIDMappings)
			m.GIDMappings = slices.Clone(s.Linux.GIDMappings)
		}
		return nil
	}
}

func validateMappings(kind string, ms []specs.LinuxIDMapping) error {
	if len(ms) == 0 {
		return fmt.Errorf("%w: no %s mapping: a user namespace without one maps no id at all", ErrInvalidIDMapping, kind)
	}
	for _, m := range ms {
		if m.Size == 0 {
			return fmt.Errorf("%w: %s mapping %d %d %d has length 0", ErrInvalidIDMapping, kind, m.ContainerID, m.HostID, m.Size)
		}
		if uint64(m.HostID)+uint64(m.Size) > math.MaxUint32 || uint64(m.ContainerID)+uint64(m.Size) > math.MaxUint32 {
			return fmt.Errorf("%w: %s mapping %d %d %d goes past id 4294967294", ErrInvalidIDMapping, kind, m.ContainerID, m.HostID, m.Size)
		}
	}
	return nil
}
