package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/spec"
	"github.com/podlab/podlab/steps/unpack"
)

func containerName(sb *sandboxRecord, m *runtimeapi.ContainerMetadata) string {
	sm := sb.config.GetMetadata()
	return fmt.Sprintf("%s_%s_%s_%s_%d", m.GetName(), sm.GetName(), sm.GetNamespace(), sm.GetUid(), m.GetAttempt())
}

// CreateContainer makes a container in a sandbox: it unpacks the image
// into a bundle (steps/unpack), writes config.json from the config
// (ocispec.go), and has a shim run `runc create` (steps/runc), with the
// container's output in the CRI log at log_directory/log_path.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	if cfg == nil || cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata with a name (crictl's container-config.json: {\"metadata\": {\"name\": ...}, \"image\": {\"image\": ...}})")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "container %s: the config names no image", cfg.Metadata.Name)
	}
	sb, err := s.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	if sb.State != stateReady {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready (it was stopped): make a new one with RunPodSandbox", sb.ID)
	}
	img, err := s.findImage(cfg.Image.Image)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := containerName(sb, cfg.Metadata)
	cs, err := s.containersOf(sb.ID)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	for _, c := range cs {
		if containerName(sb, c.config.Metadata) == name {
			return nil, status.Errorf(codes.AlreadyExists, "failed to reserve container name %q: name %q is reserved for %q", name, name, c.ID)
		}
	}
	id := newID()
	c := &containerRecord{ID: id, SandboxID: sb.ID, State: stateCreating, CreatedAt: time.Now().UnixNano(),
		Image: cfg.Image.Image, ImageRef: img.id, RepoDigest: img.repoDigest(),
		Bundle: s.node.CRIBundle(sb.ID, id), RuntimeHandler: sb.RuntimeHandler, config: cfg}
	if dir := sb.config.GetLogDirectory(); dir != "" && cfg.LogPath != "" {
		c.LogPath = filepath.Join(dir, cfg.LogPath)
	}
	if err := s.rec.putContainer(c); err != nil {
		return nil, status.Errorf(codes.Internal, "recording container %s: %v", id, err)
	}
	if err := s.create(ctx, sb, c, img); err != nil {
		if s.cleanContainer(context.WithoutCancel(ctx), c, true) == nil {
			_ = s.rec.removeContainer(id) // else the record stays "creating": a restart cleans it
		}
		return nil, status.Errorf(codes.Unknown, "failed to create container %q in sandbox %s: %v", cfg.Metadata.Name, sb.ID, err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// create runs the stages of a container: unpack, spec, runc create.
func (s *Server) create(ctx context.Context, sb *sandboxRecord, c *containerRecord, img *image) error {
	v1img, err := s.store.Image(img.name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.Bundle), 0o700); err != nil {
		return err
	}
	opts, err := s.rootfsOptions(c)
	if err != nil {
		return err
	}
	if sb.UserNS != nil {
		opts.Shift = sb.UserNS.shift() // idmapped lowers, or a chowned copy
	}
	if _, err := unpack.Unpack(ctx, v1img, c.Bundle, opts); err != nil {
		return fmt.Errorf("unpacking %s: %w", img.name, err)
	}
	if sb.UserNS != nil {
		if err := s.openBundle(sb.UserNS, sb.ID, c.Bundle); err != nil {
			return err
		}
	}
	sp, err := s.containerSpec(ctx, c.ID, sb, c.config, img.config, c.Image, c.Bundle, runtimeOOMScoreAdj())
	if err != nil {
		return fmt.Errorf("generating the spec: %w", err)
	}
	if _, err := spec.Write(c.Bundle, sp); err != nil {
		return err
	}
	// The shim writes the CRI log where the configs say (the kubelet
	// reads and rotates it there), keeps the stdin, holds the terminal.
	cfg := c.config
	if _, err := s.rtOf(c).CreateWithOptions(ctx, c.ID, c.Bundle, runc.CreateOptions{LogPath: c.LogPath,
		Stdin: cfg.Stdin, StdinOnce: cfg.StdinOnce, Tty: cfg.Tty}); err != nil {
		return err
	}
	c.State = stateCreated
	return s.rec.putContainer(c)
}

// cleanContainer removes what a container's create made: runc's container
// (and its cgroups), the rootfs (unmounted first, should it be a mount),
// the bundle; with halfMade, the log link too. The log of a container the
// kubelet knew is the kubelet's to remove (as with containerd: crictl rm
// and the kubelet's garbage collector remove it after RemoveContainer).
func (s *Server) cleanContainer(ctx context.Context, c *containerRecord, halfMade bool) error {
	var errs []error
	s.waitShim(ctx, c.ID)
	if _, err := s.rtOf(c).Delete(ctx, c.ID, true); err != nil && !errors.Is(err, runc.ErrContainerNotFound) {
		errs = append(errs, err)
	}
	if err := s.removeRootfs(c); err != nil {
		errs = append(errs, err)
	}
	// steps/unpack unpacks into <bundle>.unpack-tmp-* (its rootfs already
	// an overlay mount with the overlayfs snapshotter) and renames it into
	// place: a create killed mid-unpack leaves that directory.
	tmps, _ := filepath.Glob(c.Bundle + ".unpack-tmp-*")
	for _, dir := range append([]string{c.Bundle}, tmps...) {
		if err := removeBundleDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if halfMade && c.LogPath != "" {
		// the shim of a create that failed may have begun the log
		if fi, err := os.Lstat(c.LogPath); err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			_ = os.Remove(c.LogPath)
		}
	}
	return errors.Join(errs...)
}

// waitShim waits, up to 10s, while a shim a killed runtime started is
// still running `runc create` for the container: the shim outlives the
// runtime (as containerd's do), and what it makes must be there to remove.
func (s *Server) waitShim(ctx context.Context, id string) {
	dir := s.rtByID(id).ContainerDir(id)
	// A shim started just before the runtime was killed writes its PID
	// first thing; until it has, the container's directory may be there
	// without it: give the shim a moment rather than race it.
	var pid int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(dir); err != nil {
			return // no directory: no shim was started
		}
		b, _ := os.ReadFile(filepath.Join(dir, "shim.pid"))
		if pid, _ = strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		if unix.Kill(pid, 0) != nil {
			return // the shim is gone
		}
		if _, err := os.Stat(s.rtByID(id).StateFile(id)); err == nil {
			if _, err := os.Stat(filepath.Join(s.rtByID(id).ContainerDir(id), "container.pid")); err == nil {
				return // runc create is done: runc knows it, the pid is written
			}
		}
	}
}

// removeBundleDir unmounts what is still mounted on the bundle's rootfs,
// then removes the bundle.
func removeBundleDir(bundle string) error {
	rootfs := filepath.Join(bundle, spec.RootfsDir)
	for i := 0; i < 8 && isMountPoint(rootfs); i++ {
		if err := unix.Unmount(rootfs, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", rootfs, err)
		}
	}
	return os.RemoveAll(bundle)
}

// isMountPoint: path's device differs from its parent's.
func isMountPoint(path string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(path, &a) != nil || unix.Lstat(filepath.Dir(path), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// StartContainer starts a created container: `runc start`.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	notCreated := func(st *runtimeapi.ContainerStatus) error {
		return status.Errorf(codes.FailedPrecondition, "container %s is in %s state: only a created container starts", c.ID, st.State)
	}
	if c.State != stateCreated {
		return nil, notCreated(s.containerState(ctx, c))
	}
	// runc start refuses a container that is not created (running,
	// stopped): its state is read when it refused, not before every start
	// (each read is a `runc state`).
	if _, err := s.rtOf(c).Start(ctx, c.ID); err != nil {
		if st := s.containerState(ctx, c); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			return nil, notCreated(st)
		}
		return nil, status.Errorf(codes.Unknown, "failed to start container %q: %v", c.ID, err)
	}
	c.StartedAt = time.Now().UnixNano()
	if err := s.rec.putContainer(c); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// stopSignal is the config's stop signal, else SIGTERM.
func stopSignal(cfg *runtimeapi.ContainerConfig) string {
	if sig := cfg.GetStopSignal(); sig != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		return sig.String()
	}
	return "SIGTERM"
}

// stopContainer sends the stop signal, waits up to timeout seconds, then
// SIGKILL, as containerd's StopContainer. A container not running is left.
func (s *Server) stopContainer(ctx context.Context, c *containerRecord, timeout int64) error {
	st := s.containerState(ctx, c)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING && st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil
	}
	wait := func(d time.Duration) bool {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := s.rtOf(c).Wait(wctx, c.ID)
		return err == nil
	}
	if timeout > 0 && st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		if err := s.rtOf(c).Kill(ctx, c.ID, stopSignal(c.config)); err == nil && wait(time.Duration(timeout)*time.Second) {
			return nil
		}
	}
	if err := s.rtOf(c).Kill(ctx, c.ID, "SIGKILL"); err != nil {
		if wait(100 * time.Millisecond) {
			return nil
		}
		return err
	}
	if !wait(10 * time.Second) {
		return fmt.Errorf("container %s did not exit 10s after SIGKILL", c.ID)
	}
	return nil
}

// StopContainer stops a running container: its stop signal, the timeout,
// then SIGKILL. A stopped container is not an error.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	if err := s.stopContainer(ctx, c, req.Timeout); err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to stop container %q: %v", c.ID, err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container (a running one forcibly): runc
// delete, its bundle, its log. A container already removed is not an
// error (the CRI says so, and containerd does it).
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if status.Code(err) == codes.NotFound {
		s.note("RemoveContainer: container %q is not here (removed already): nothing to do", req.ContainerId)
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to remove container %q: %v", c.ID, err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Server) removeContainer(ctx context.Context, c *containerRecord) error {
	if err := s.cleanContainer(ctx, c, c.State == stateCreating); err != nil {
		return err
	}
	return s.rec.removeContainer(c.ID)
}

// containerState is what runc and the shim say of the container now.
func (s *Server) containerState(ctx context.Context, c *containerRecord) *runtimeapi.ContainerStatus {
	st, _ := s.containerStateRunc(ctx, c)
	return st
}

// shimState sets st's state from the container's files, as its shim and
// runc keep them, when they tell it without asking runc: exit.json (the
// shim wrote it when the process exited: exited, with its code), runc's
// exec fifo (created, not started), runc's state file with the shim alive
// (running: the shim writes exit.json when the process ends). Anything
// else (the shim gone without an exit, runc's state missing) is false:
// `runc state` tells.
func (s *Server) shimState(c *containerRecord, st *runtimeapi.ContainerStatus) bool {
	rt := s.rtOf(c)
	if b, err := os.ReadFile(rt.ExitPath(c.ID)); err == nil {
		var ex runc.Exit
		if json.Unmarshal(b, &ex) != nil {
			return false // being written
		}
		setExited(st, &ex)
		return true
	}
	if rt.Created(c.ID) {
		st.State = runtimeapi.ContainerState_CONTAINER_CREATED
		return true
	}
	if _, err := os.Stat(rt.StateFile(c.ID)); err != nil {
		return false
	}
	if pid := readPidFile(filepath.Join(rt.ContainerDir(c.ID), "shim.pid")); pid > 0 && processAlive(pid) {
		if _, err := os.Stat(rt.ExitPath(c.ID)); err == nil {
			return false // it exited meanwhile: runc says how
		}
		st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
		return true
	}
	return false
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	if unix.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return !(i > 0 && i+2 < len(b) && b[i+2] == 'Z')
}

// setExited sets st exited as ex says.
func setExited(st *runtimeapi.ContainerStatus, ex *runc.Exit) {
	st.State = runtimeapi.ContainerState_CONTAINER_EXITED
	st.ExitCode = int32(ex.Code)
	st.FinishedAt = ex.ExitedAt.UnixNano()
	st.Reason = "Completed"
	if ex.Code != 0 {
		st.Reason = "Error"
	}
	if st.StartedAt == 0 {
		st.StartedAt = st.FinishedAt // killed before it started
	}
}

// containerStateRunc is containerState, with the runc state it was read
// from: nil when runc was not asked (or failed). The state is read from
// the files of the container's shim and runc first (shimState), as
// containerd answers from what its shims report; `runc state` is asked
// only when they do not say.
func (s *Server) containerStateRunc(ctx context.Context, c *containerRecord) (*runtimeapi.ContainerStatus, *runc.State) {
	st := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: c.config.Metadata, State: runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		CreatedAt: c.CreatedAt, StartedAt: c.StartedAt,
		Image:    &runtimeapi.ImageSpec{Image: c.Image, Annotations: c.config.GetImage().GetAnnotations()},
		ImageRef: c.RepoDigest, ImageId: c.ImageRef,
		Labels: c.config.Labels, Annotations: c.config.Annotations, LogPath: c.LogPath,
	}
	if st.ImageRef == "" {
		st.ImageRef = c.ImageRef
	}
	if st.LogPath == "" {
		st.LogPath = s.rtOf(c).LogPath(c.ID)
	}
	for _, m := range c.config.Mounts {
		st.Mounts = append(st.Mounts, m)
	}
	if c.State != stateCreated {
		st.Reason = "Creating"
		return st, nil
	}
	if s.shimState(c, st) {
		return st, nil
	}
	rs, err := s.rtOf(c).State(ctx, c.ID)
	if err != nil {
		st.Reason, st.Message = "Unknown", err.Error()
		return st, nil
	}
	switch {
	case rs.Exit != nil:
		setExited(st, rs.Exit)
	case rs.Status == "created":
		st.State = runtimeapi.ContainerState_CONTAINER_CREATED
	case rs.Status == "running" || rs.Status == "paused":
		st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	case rs.Status == "stopped" && rs.ShimPid > 0 && processAlive(rs.ShimPid):
		// The process is gone and its shim, alive, has not written its
		// exit yet (it takes the last lines of the log first): running
		// until it does, as containerd's task is until its shim's exit
		// event; not unknown, which a kubelet counts as exit code 255.
		st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return st, rs
}

// ContainerStatus is the container's state; with verbose, its record, pid
// and bundle as info["info"] (crictl inspect shows it).
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	st, rs := s.containerStateRunc(ctx, c)
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.Verbose {
		rt := s.rtOf(c)
		info := map[string]any{"sandboxID": c.SandboxID, "record": s.rec.containerPath(c.ID), "bundle": c.Bundle,
			"config": filepath.Join(c.Bundle, spec.ConfigFile), "runtimeDir": rt.ContainerDir(c.ID), "log": rt.LogPath(c.ID)}
		switch {
		case rs != nil:
			info["pid"], info["shimPid"], info["runcState"] = rs.Pid, rs.ShimPid, rs.StateFile
		case c.State == stateCreated && st.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN:
			// what runc state would say, from the same files: the pid
			// runc create wrote (0 once it exited, as runc says), the
			// shim's, runc's state file
			pid := 0
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				pid = readPidFile(filepath.Join(rt.ContainerDir(c.ID), "container.pid"))
			}
			info["pid"], info["shimPid"] = pid, readPidFile(filepath.Join(rt.ContainerDir(c.ID), "shim.pid"))
			if _, err := os.Stat(rt.StateFile(c.ID)); err == nil {
				info["runcState"] = rt.StateFile(c.ID)
			}
		case c.State != stateCreated:
			// still being made: runc may know it already
			if rs, err := rt.State(ctx, c.ID); err == nil {
				info["pid"], info["shimPid"], info["runcState"] = rs.Pid, rs.ShimPid, rs.StateFile
			}
		}
		if sp, err := spec.Read(c.Bundle); err == nil {
			info["runtimeSpec"] = sp
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// ListContainers lists the containers the filter lets through.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	all, err := s.rec.containerIDs()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	f := req.GetFilter()
	resp := &runtimeapi.ListContainersResponse{}
	for _, id := range all {
		if f.GetId() != "" && !strings.HasPrefix(id, f.GetId()) {
			continue
		}
		c, err := s.rec.container(id)
		if err != nil || c.State == stateCreating {
			continue
		}
		if f.GetPodSandboxId() != "" && !strings.HasPrefix(c.SandboxID, f.GetPodSandboxId()) {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), c.config.Labels) {
			continue
		}
		st := s.containerState(ctx, c)
		if f.GetState() != nil && f.GetState().State != st.State {
			continue
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{Id: c.ID, PodSandboxId: c.SandboxID,
			Metadata: st.Metadata, Image: st.Image, ImageRef: st.ImageRef, ImageId: st.ImageId, State: st.State,
			CreatedAt: c.CreatedAt, Labels: st.Labels, Annotations: st.Annotations})
	}
	return resp, nil
}

// UpdateContainerResources changes a container's cgroup limits: `runc
// update` with the CPU and memory values given.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	r := req.GetLinux()
	if r == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	args := []string{"--root", s.rtOf(c).RootDir(), "update"}
	add := func(flag string, v int64) {
		if v != 0 {
			args = append(args, flag, strconv.FormatInt(v, 10))
		}
	}
	add("--cpu-period", r.CpuPeriod)
	add("--cpu-quota", r.CpuQuota)
	add("--cpu-share", r.CpuShares)
	add("--memory", r.MemoryLimitInBytes)
	if r.CpusetCpus != "" {
		args = append(args, "--cpuset-cpus", r.CpusetCpus)
	}
	if r.CpusetMems != "" {
		args = append(args, "--cpuset-mems", r.CpusetMems)
	}
	args = append(args, c.ID)
	if s.cfg.OnCommand != nil {
		s.cfg.OnCommand(append([]string{s.rtOf(c).Binary}, args...))
	}
	if out, err := exec.CommandContext(ctx, s.rtOf(c).Binary, args...).CombinedOutput(); err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to update resources of container %q: %v: %s", c.ID, err, strings.TrimSpace(string(out)))
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog has the container's shim close its log and open the
// log path again, as containerd's CRI replaces the container's log writer:
// the kubelet renamed N.log to N.log.<time> (rotation) and asks for a new
// N.log. Only a running container's log is reopened.
func (s *Server) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	if st := s.containerState(ctx, c); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container is not running: container %s is in %s state", c.ID, st.State)
	}
	if err := s.rtOf(c).ReopenLog(ctx, c.ID); err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to reopen the log of container %q: %v", c.ID, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
