package runc

// The host's cgroups, as package internal/cgroups reads and changes them
// (the kubelet uses the same package for its pod and QoS cgroups). runc's
// callers keep these names.

import (
	"io"

	"github.com/podlab/podlab/internal/cgroups"
)

// CgroupVersion names a cgroup layout (cgroups.CgroupVersion).
type CgroupVersion = cgroups.CgroupVersion

// The cgroup layouts.
const (
	CgroupNone   = cgroups.CgroupNone
	CgroupV1     = cgroups.CgroupV1
	CgroupV2     = cgroups.CgroupV2
	CgroupHybrid = cgroups.CgroupHybrid
)

// CgroupMount is one mounted cgroup hierarchy (cgroups.CgroupMount).
type CgroupMount = cgroups.CgroupMount

// ProcCgroup is a process's cgroup per controller (cgroups.ProcCgroup).
type ProcCgroup = cgroups.ProcCgroup

// Limit is a cgroup limit read back (cgroups.Limit).
type Limit = cgroups.Limit

// Cgroup is a container's cgroup as the kernel has it (cgroups.Cgroup).
type Cgroup = cgroups.Cgroup

// ParseCgroupMounts is cgroups.ParseCgroupMounts.
func ParseCgroupMounts(mountinfo io.Reader) ([]CgroupMount, error) {
	return cgroups.ParseCgroupMounts(mountinfo)
}

// HostCgroupMounts is cgroups.HostCgroupMounts.
func HostCgroupMounts() ([]CgroupMount, error) { return cgroups.HostCgroupMounts() }

// CgroupLayout is cgroups.CgroupLayout.
func CgroupLayout(mounts []CgroupMount) CgroupVersion { return cgroups.CgroupLayout(mounts) }

// AvailableControllers is cgroups.AvailableControllers.
func AvailableControllers(mounts []CgroupMount) map[string]CgroupVersion {
	return cgroups.AvailableControllers(mounts)
}

// ParseProcCgroup is cgroups.ParseProcCgroup.
func ParseProcCgroup(r io.Reader) (ProcCgroup, error) { return cgroups.ParseProcCgroup(r) }

// UniformProcCgroup is cgroups.UniformProcCgroup.
func UniformProcCgroup(mounts []CgroupMount, path string) ProcCgroup {
	return cgroups.UniformProcCgroup(mounts, path)
}

// ReadCgroup is cgroups.ReadCgroup.
func ReadCgroup(mounts []CgroupMount, pc ProcCgroup) *Cgroup { return cgroups.ReadCgroup(mounts, pc) }

// ReadProcessCgroup is cgroups.ReadProcessCgroup.
func ReadProcessCgroup(mounts []CgroupMount, pid int) (*Cgroup, error) {
	return cgroups.ReadProcessCgroup(mounts, pid)
}

// RemoveCgroupDirs is cgroups.RemoveCgroupDirs.
func RemoveCgroupDirs(mounts []CgroupMount, path string) ([]string, error) {
	return cgroups.RemoveCgroupDirs(mounts, path)
}

// RemoveCgroupDirsBelow is cgroups.RemoveCgroupDirsBelow.
func RemoveCgroupDirsBelow(mounts []CgroupMount, path, parent string) ([]string, error) {
	return cgroups.RemoveCgroupDirsBelow(mounts, path, parent)
}

// KillCgroupProcs is cgroups.KillCgroupProcs.
func KillCgroupProcs(mounts []CgroupMount, path string) ([]int, error) {
	return cgroups.KillCgroupProcs(mounts, path)
}

// EnterCgroup is cgroups.EnterCgroup.
func EnterCgroup(mounts []CgroupMount, path string, pid int) ([]string, error) {
	return cgroups.EnterCgroup(mounts, path, pid)
}
