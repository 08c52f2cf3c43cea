package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
