package rest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrStoreServed means another API server already serves the store: two
// kube-apiservers may share one etcd, but podlab's store is a file one
// process serves, so a second `podlab apiserver` refuses to start.
var ErrStoreServed = errors.New("another podlab apiserver serves this store")

// ClaimStore takes the lock file path (statedir's APIServerLock) for this
// process, with its pid in it, and returns the function that lets it go.
// The lock is an flock: the kernel drops it when the process ends, however
// it ends, so a crashed API server never blocks the next one.
func ClaimStore(path string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("claiming the store: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("claiming the store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				who = "pid " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("%w (%s holds %s): stop it first, or talk to it with kubectl", ErrStoreServed, who, path)
		}
		return nil, fmt.Errorf("claiming the store (%s): %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
