package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// cleanHalfMade removes what creates killed half-way left: every record
// still "creating" (the record is written before anything is made).
// A container's: runc's container and cgroups, the rootfs mount, the
// bundle, the log link. A sandbox's: the CNI attachment, the namespace
// mounts, the pod directory.
func (s *Server) cleanHalfMade(ctx context.Context) ([]Cleaned, error) {
	var out []Cleaned
	var errs []error
	// A record being written when the server was killed: its temporary
	// file (the record itself is the old one, or none).
	for _, dir := range []string{s.rec.sandboxes, s.rec.containers} {
		tmps, _ := filepath.Glob(filepath.Join(dir, ".*.json-*"))
		for _, tmp := range tmps {
			if err := os.Remove(tmp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	cids, err := s.rec.containerIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range cids {
		c, err := s.rec.container(id)
		if err != nil || c.State != stateCreating {
			continue
		}
		cl := Cleaned{Kind: "container", ID: id}
		if _, err := os.Stat(c.Bundle); err == nil {
			cl.Removed = append(cl.Removed, c.Bundle)
		}
		if _, err := os.Stat(s.rtOf(c).ContainerDir(id)); err == nil {
			cl.Removed = append(cl.Removed, s.rtOf(c).ContainerDir(id))
		}
		if err := s.removeContainer(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("cleaning the half-made container %s: %w", id, err))
			continue
		}
		out = append(out, cl)
	}
	sids, err := s.rec.sandboxIDs()
	if err != nil {
		return out, err
	}
	for _, id := range sids {
		sb, err := s.rec.sandbox(id)
		if err != nil || sb.State != stateCreating {
			continue
		}
		cl := Cleaned{Kind: "sandbox", ID: id}
		removed, err := s.teardownSandbox(ctx, sb)
		cl.Removed = append(cl.Removed, removed...)
		if err == nil {
			if _, serr := os.Stat(s.node.PodDir(id)); serr == nil {
				cl.Removed = append(cl.Removed, s.node.PodDir(id))
			}
			err = errors.Join(os.RemoveAll(s.node.PodDir(id)), s.rec.removeSandbox(id))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cleaning the half-made sandbox %s: %w", id, err))
			continue
		}
		out = append(out, cl)
	}
	return out, errors.Join(errs...)
}

// StoppedPause is a pause process StopPauses stopped.
type StoppedPause struct {
	SandboxID string
	Pid       int
}

// StopPauses stops the pause processes of the sandboxes node's runtime
// recorded, whatever their state, and removes their cgroups: what `podlab
// reset` does before it unmounts the sandboxes' namespaces (a pause process
// outlives its runtime, as containerd's shims do). A PID the kernel gave to
// another process since is left alone (runc.StopPause). It works on the
// records alone: the runtime need not run, and should not (reset stops it
// first).
func StopPauses(ctx context.Context, node statedir.Node) ([]StoppedPause, error) {
	rec := records{sandboxes: node.CRISandboxesDir(), containers: node.CRIContainersDir()}
	ids, err := rec.sandboxIDs()
	if err != nil {
		return nil, fmt.Errorf("listing the sandboxes of node %s: %w", node.Name, err)
	}
	var out []StoppedPause
	var errs []error
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		sb, err := rec.sandbox(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := sb.Namespaces["pid"]; !ok {
			continue
		}
		o := pauseOptions(node, sb)
		pid := readPidFile(o.PidFile)
		live := runc.PauseRunning(o.PidFile, o.NamespaceFile) == nil
		if err := runc.StopPause(ctx, o.PidFile, o.NamespaceFile); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
			continue
		}
		if err := removePauseCgroup(ctx, node, sb); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		}
		if live {
			out = append(out, StoppedPause{SandboxID: id, Pid: pid})
		}
	}
	return out, errors.Join(errs...)
}
