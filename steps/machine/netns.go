package machine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// threadNetns is the calling thread's network namespace.
const threadNetns = "/proc/thread-self/ns/net"

// newNetns makes a network namespace and pins it with a bind mount at
// path (a new empty file), as `ip netns add` does under /run/netns: a
// thread unshares its network namespace, the namespace's file is mounted
// on path, and the thread goes back to where it was. A thread that cannot
// go back is never unlocked, so Go ends it with its goroutine.
func newNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("making the namespace's mount point %s: %w", path, err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(threadNetns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		merr := unix.Mount(threadNetns, path, "", unix.MS_BIND, "")
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(merr, fmt.Errorf("going back to the host's network namespace: %w", err))
			return // the thread stays locked: it ends with this goroutine
		}
		runtime.UnlockOSThread()
		if merr != nil {
			merr = fmt.Errorf("pinning the network namespace at %s: %w", path, merr)
		}
		errc <- merr
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// removeNetns unmounts the namespace pinned at path and removes the file.
func removeNetns(path string) error {
	for range 10 {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break
			}
			return fmt.Errorf("unmounting the network namespace %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// Do runs fn on a thread inside the network namespace at netnsPath, then
// brings the thread back. What fn starts from that thread is in the
// namespace: a socket it opens, a process it starts (exec.Cmd.Start forks
// from the calling thread, and the child keeps the thread's namespaces).
// fn must not start goroutines that expect to be in the namespace: they
// run on other threads.
func Do(netnsPath string, fn func() error) error {
	target, err := os.Open(netnsPath)
	if err != nil {
		return fmt.Errorf("opening the machine's network namespace: %w", err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(threadNetns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering the network namespace %s: %w (is it a namespace? podlab node leave, then join again)", netnsPath, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leaving the network namespace %s: %w", netnsPath, err))
			return // the thread stays locked: it ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Exec replaces this process with argv0 (argv, env), run inside the
// network namespace at netnsPath: the thread enters it, then execve(2),
// which leaves that thread the only one of the new program, so all of it
// runs in the namespace under the same pid. It returns only on failure.
func Exec(netnsPath, argv0 string, argv, env []string) error {
	target, err := os.Open(netnsPath)
	if err != nil {
		return fmt.Errorf("opening the machine's network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open(threadNetns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the network namespace %s: %w (is it a namespace? podlab node leave, then join again)", netnsPath, err)
	}
	err = syscall.Exec(argv0, argv, env)
	if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr == nil {
		runtime.UnlockOSThread()
	}
	return fmt.Errorf("running %s in the network namespace %s: %w", argv0, netnsPath, err)
}

// Inside says whether this process (its main thread) is in the network
// namespace at netnsPath.
func Inside(netnsPath string) (bool, error) {
	return SameNetns("/proc/self/ns/net", netnsPath)
}

// SameNetns says whether two files (/proc/PID/ns/net, a bind mount) are
// the same network namespace: same device and inode.
func SameNetns(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("reading the network namespace of %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("reading the network namespace of %s: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// Dial opens a TCP connection to addr from inside the network namespace at
// netnsPath: the socket is made on a thread in the namespace, so it
// belongs there for its whole life.
func Dial(ctx context.Context, netnsPath, addr string) (net.Conn, error) {
	var conn net.Conn
	err := Do(netnsPath, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}
