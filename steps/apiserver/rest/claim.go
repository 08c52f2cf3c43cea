package rest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
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
			if c := parseClaim(b); c.PID != 0 {
				who = "pid " + strconv.Itoa(c.PID)
				if c.URL != "" {
					who += ", serving " + c.URL
				}
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

// Claimant is the API server that holds a store's claim: its pid and,
// once it listens, the URL it serves.
type Claimant struct {
	PID int
	URL string // "" while it is starting
}

// Advertise records url (see URLFor) in the claim file path, which this
// process holds (ClaimStore), under its pid: how podlab's kubectl-style
// commands find the API server of a state directory without a guess.
// Only whole lines are written, after the pid line, so a reader sees the
// URL complete or not at all.
func Advertise(path, url string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("recording the API server's URL in %s: %w", path, err)
	}
	defer f.Close()
	// the pid line, as ClaimStore wrote it, then the URL: one write that
	// only adds to what is there
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+url+"\n"), 0); err != nil {
		return fmt.Errorf("recording the API server's URL in %s: %w", path, err)
	}
	return nil
}

// Serving says whether an API server holds the claim file path, and
// which: it asks the kernel for the flock (a held lock is a live
// process, however the last one ended), then reads the pid and URL.
// It takes well under a millisecond, so a command may ask each time.
func Serving(path string) (Claimant, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Claimant{}, false, nil
	}
	if err != nil {
		return Claimant{}, false, fmt.Errorf("looking for the API server's claim %s: %w", path, err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return Claimant{}, false, nil // nobody holds it
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return Claimant{}, false, fmt.Errorf("looking for the API server's claim %s: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Claimant{}, true, fmt.Errorf("reading the API server's claim %s: %w", path, err)
	}
	return parseClaim(b), true, nil
}

// ErrNotServing: an API server holds the claim but has not advertised
// its URL within the wait: it is stuck starting, or is not podlab's.
var ErrNotServing = errors.New("the API server holds the store but serves no URL")

// WaitServing is Serving for a caller about to connect: an API server
// that holds the claim but has not advertised its URL yet is starting, so
// it asks again every 50 ms, for at most timeout (then ErrNotServing).
func WaitServing(ctx context.Context, path string, timeout time.Duration) (Claimant, bool, error) {
	var c Claimant
	var serving bool
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		c, serving, err = Serving(path)
		return !serving || c.URL != "", err
	})
	switch {
	case serving && c.URL == "":
		return c, true, fmt.Errorf("%w after %s (pid %d holds %s): stop it, or wait and try again", ErrNotServing, timeout, c.PID, path)
	case err != nil:
		return c, serving, err
	}
	return c, serving, nil
}

// parseClaim reads "PID\nURL\n"; a line without its newline is not
// written yet.
func parseClaim(b []byte) Claimant {
	var c Claimant
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > 0 && strings.HasSuffix(lines[0], "\n") {
		c.PID, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	}
	if len(lines) > 1 && strings.HasSuffix(lines[1], "\n") {
		c.URL = strings.TrimSpace(lines[1])
	}
	return c
}

// URLFor is the URL clients on this machine reach a listener's address
// at: https://HOST:PORT, with 127.0.0.1 for an address that listens on
// every interface (0.0.0.0, ::), which the serving certificate names.
func URLFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "https://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, port)
}
