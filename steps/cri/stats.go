package cri

import (
	"context"
	"encoding/json"
	"io/fs"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runcStats is what `runc events --stats` says of a container's cgroup.
type runcStats struct {
	Data struct {
		CPU struct {
			Usage struct {
				Total uint64 `json:"total"`
			} `json:"usage"`
		} `json:"cpu"`
		Memory struct {
			Usage struct {
				Usage uint64 `json:"usage"`
			} `json:"usage"`
			Raw map[string]uint64 `json:"raw"`
		} `json:"memory"`
	} `json:"data"`
}

// containerStats reads the container's cgroup counters through `runc
// events --stats` (cgroup v1 or v2 alike).
func (s *Server) containerStats(ctx context.Context, c *containerRecord) *runtimeapi.ContainerStats {
	now := time.Now().UnixNano()
	st := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.ID, Metadata: c.config.Metadata, Labels: c.config.Labels, Annotations: c.config.Annotations},
	}
	used, inodes := dirUsage(filepath.Join(c.Bundle, "rootfs"))
	st.WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: now, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: c.Bundle},
		UsedBytes: &runtimeapi.UInt64Value{Value: used}, InodesUsed: &runtimeapi.UInt64Value{Value: inodes}}
	out, err := exec.CommandContext(ctx, s.rtOf(c).Binary, "--root", s.rtOf(c).RootDir(), "events", "--stats", c.ID).Output()
	if err != nil {
		return st
	}
	var rs runcStats
	if json.Unmarshal(out, &rs) != nil {
		return st
	}
	ws := rs.Data.Memory.Usage.Usage
	inactive := rs.Data.Memory.Raw["total_inactive_file"]
	if v, ok := rs.Data.Memory.Raw["inactive_file"]; ok {
		inactive = v
	}
	if inactive < ws {
		ws -= inactive
	}
	st.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: rs.Data.CPU.Usage.Total}}
	st.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
		UsageBytes: &runtimeapi.UInt64Value{Value: rs.Data.Memory.Usage.Usage}}
	return st
}

// ContainerStats is one container's CPU, memory and writable layer.
func (s *Server) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.containerStats(ctx, c)}, nil
}

// ListContainerStats is ContainerStats of every container the filter lets through.
func (s *Server) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	list, err := s.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		Id: f.GetId(), PodSandboxId: f.GetPodSandboxId(), LabelSelector: f.GetLabelSelector()}})
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, ct := range list.Containers {
		if c, err := s.rec.container(ct.Id); err == nil {
			resp.Stats = append(resp.Stats, s.containerStats(ctx, c))
		}
	}
	return resp, nil
}

// PodSandboxStats sums the sandbox's containers.
func (s *Server) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	cs, err := s.containersOf(sb.ID)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	now := time.Now().UnixNano()
	lx := &runtimeapi.LinuxPodSandboxStats{
		Cpu:    &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{}},
	}
	for _, c := range cs {
		st := s.containerStats(ctx, c)
		lx.Containers = append(lx.Containers, st)
		if st.Cpu != nil {
			lx.Cpu.UsageCoreNanoSeconds.Value += st.Cpu.UsageCoreNanoSeconds.Value
			lx.Memory.WorkingSetBytes.Value += st.Memory.WorkingSetBytes.Value
			lx.Memory.UsageBytes.Value += st.Memory.UsageBytes.Value
		}
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: sb.config.Metadata, Labels: sb.config.Labels, Annotations: sb.config.Annotations},
		Linux:      lx,
	}}, nil
}

// ListPodSandboxStats is PodSandboxStats of every sandbox the filter lets through.
func (s *Server) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	list, err := s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		Id: f.GetId(), LabelSelector: f.GetLabelSelector()}})
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, sb := range list.Items {
		st, err := s.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb.Id})
		if err != nil {
			continue // removed meanwhile
		}
		resp.Stats = append(resp.Stats, st.Stats)
	}
	return resp, nil
}

// dirUsage is the bytes and inodes under dir (not following symlinks).
func dirUsage(dir string) (bytes, inodes uint64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += uint64(st.Blocks) * 512
			}
		}
		return nil
	})
	return bytes, inodes
}
