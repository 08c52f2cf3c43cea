package cni

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// DeleteBridge deletes the bridge called name in the network namespace
// pinned at netnsPath ("" for the caller's). CNI DEL leaves the bridge
// behind (the next pod's ADD uses it again), so what removes a node's
// network for good (podlab reset) deletes it. It reports whether there was
// one; a link of that name that is not a bridge is left alone.
func DeleteBridge(name, netnsPath string) (bool, error) {
	h := &netlink.Handle{}
	if netnsPath != "" {
		ns, err := netns.GetFromPath(netnsPath)
		if err != nil {
			return false, fmt.Errorf("opening the network namespace %s to delete bridge %s: %w", netnsPath, name, err)
		}
		defer ns.Close()
		if h, err = netlink.NewHandleAt(ns); err != nil {
			return false, fmt.Errorf("entering the network namespace %s to delete bridge %s: %w", netnsPath, name, err)
		}
		defer h.Close()
	}
	link, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking for bridge %s: %w", name, err)
	}
	if link.Type() != "bridge" {
		return false, fmt.Errorf("%s is a %s link, not the pods' bridge: left alone", name, link.Type())
	}
	if err := h.LinkDel(link); err != nil {
		return false, fmt.Errorf("deleting bridge %s: %w", name, err)
	}
	return true, nil
}

// Released is what ReleaseAll undid of a node's network.
type Released struct {
	// Sandboxes are the attachments detached (CNI DEL).
	Sandboxes []Result
	// Bridge is the bridge deleted, "" when there was none.
	Bridge string
}

// ReleaseAll undoes a node's pod network for good, as podlab reset does:
// CNI DEL of every sandbox libcni's cache (cfg.CacheDir) holds, then the
// bridge. It works in the network namespace pinned at netnsPath, the
// node's machine, or in the caller's when netnsPath is "": where the
// node's runtime ran. What lives in a namespace podlab does not own, the
// host's (the portmap and firewall plugins' shared chains, CNI-HOSTPORT-*
// and CNI-FORWARD, and ip_forward), stays: other runtimes may use it.
func ReleaseAll(ctx context.Context, cfg Config, bridge, netnsPath string) (*Released, error) {
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	out := &Released{}
	err = inNetns(netnsPath, func() error {
		ids, err := n.Sandboxes()
		if err != nil {
			return err
		}
		var errs []error
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := n.Teardown(ctx, id)
			out.Sandboxes = append(out.Sandboxes, r...)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	deleted, berr := DeleteBridge(bridge, netnsPath)
	if deleted {
		out.Bridge = bridge
	}
	return out, errors.Join(err, berr)
}

// inNetns runs fn on a thread in the network namespace pinned at path
// ("" runs fn as it is): the plugins fn starts inherit it. The thread goes
// back to its own namespace before it is unlocked; if it cannot, it stays
// locked and Go ends it with the goroutine.
func inNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening the thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening the network namespace %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering the network namespace %s: %w", path, err)
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
