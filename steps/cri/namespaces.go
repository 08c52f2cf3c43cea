package cri

// A sandbox's namespaces, pinned as CRI-O's pinns pins them: a locked OS
// thread unshares them, and /proc/self/task/<tid>/ns/<kind> is bind-mounted
// onto a file, which keeps the namespace alive with no process in it.
// containerd keeps them with a pause container instead.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// cloneFlag is unshare's flag for a kind of namespace.
func cloneFlag(kind string) int {
	switch kind {
	case "net":
		return unix.CLONE_NEWNET
	case "ipc":
		return unix.CLONE_NEWIPC
	case "uts":
		return unix.CLONE_NEWUTS
	}
	return 0
}

// pinNamespaces makes namespaces of kinds (net, ipc, uts; user first when
// u is set), pinned at paths[kind], with lo up in the network namespace
// and hostname in the UTS namespace. With u, a child clones them all,
// owned by the new user namespace (hold, or pinInUserNamespace when hold
// is nil), and a thread joins the pinned network and UTS namespaces to
// set them up; without, a locked OS thread unshares them. On failure it
// removes what it made.
func pinNamespaces(kinds []string, paths map[string]string, hostname string, u *userNamespace, hold func(kinds []string, paths map[string]string) error) error {
	if len(kinds) == 0 {
		return nil
	}
	for _, k := range kinds {
		p := paths[k]
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o444)
		if err != nil {
			return err
		}
		f.Close()
	}
	threadKinds := kinds
	if u != nil {
		if hold == nil {
			hold = func(kinds []string, paths map[string]string) error { return pinInUserNamespace(u, kinds, paths) }
		}
		if err := hold(kinds, paths); err != nil {
			_, _ = unpinNamespaces(paths)
			return err
		}
		threadKinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k != "net" && k != "uts" })
	}
	flags := 0
	for _, k := range threadKinds {
		flags |= cloneFlag(k)
	}
	done := make(chan error, 1)
	go func() {
		// The thread goes back to the host's namespaces before it is
		// unlocked; if it cannot, it stays locked and dies with the
		// goroutine, so that no other goroutine runs in the pod's.
		runtime.LockOSThread()
		var orig []int
		restored := false
		defer func() {
			for _, fd := range orig {
				unix.Close(fd)
			}
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		for _, k := range threadKinds {
			fd, err := unix.Open("/proc/thread-self/ns/"+k, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- fmt.Errorf("opening the thread's %s namespace: %w", k, err)
				return
			}
			orig = append(orig, fd)
		}
		done <- func() error {
			defer func() {
				for _, fd := range orig {
					if unix.Setns(fd, 0) != nil {
						return
					}
				}
				restored = true
			}()
			if u != nil {
				if err := joinNamespaces(threadKinds, paths); err != nil {
					return err
				}
			} else if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("unshare(%s): %w", strings.Join(kinds, ", "), err)
			}
			if flags&unix.CLONE_NEWUTS != 0 && hostname != "" {
				if err := unix.Sethostname([]byte(hostname)); err != nil {
					return fmt.Errorf("setting the hostname %q: %w", hostname, err)
				}
			}
			if flags&unix.CLONE_NEWNET != 0 {
				if err := loopbackUp(); err != nil {
					return fmt.Errorf("bringing up lo in the pod's network namespace: %w", err)
				}
			}
			if u != nil {
				return nil // pinned already
			}
			tid := unix.Gettid()
			for _, k := range kinds {
				src := fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, k)
				if err := unix.Mount(src, paths[k], "", unix.MS_BIND, ""); err != nil {
					return fmt.Errorf("bind-mounting %s onto %s: %w", src, paths[k], err)
				}
			}
			return nil
		}()
	}()
	if err := <-done; err != nil {
		_, _ = unpinNamespaces(paths)
		return err
	}
	return nil
}

// joinNamespaces moves the calling thread into the pinned namespaces of
// kinds.
func joinNamespaces(kinds []string, paths map[string]string) error {
	for _, k := range kinds {
		fd, err := unix.Open(paths[k], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = unix.Setns(fd, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("joining the %s namespace at %s: %w", k, paths[k], err)
		}
	}
	return nil
}

// loopbackUp sets IFF_UP on lo, in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// isNamespaceMount reports whether path is a bind mount of a namespace.
func isNamespaceMount(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// unpinNamespaces unmounts and removes the namespace files: the
// namespaces end with the last process in them. It returns the paths it
// removed.
func unpinNamespaces(paths map[string]string) ([]string, error) {
	var removed []string
	var errs []error
	for _, p := range paths {
		for isNamespaceMount(p) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
				break
			}
		}
		if err := os.Remove(p); err == nil {
			removed = append(removed, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
