package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Package is the Debian package that has containerd and its runc shim.
const Package = "containerd"

// ShimBinary is the shim containerd starts for each pod (runtime_type
// io.containerd.runc.v2), found on containerd's PATH.
const ShimBinary = "containerd-shim-runc-v2"

// Find returns the containerd binary on PATH, after checking that its runc
// shim is there too; ErrNotInstalled when either is missing.
func Find() (string, error) {
	bin, err := exec.LookPath("containerd")
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: no containerd on PATH (%s)", ErrNotInstalled, os.Getenv("PATH"))
	}
	if err != nil {
		return "", fmt.Errorf("looking for containerd: %w", err)
	}
	if _, err := exec.LookPath(ShimBinary); err != nil {
		return "", fmt.Errorf("%w: %s is on PATH, but not its shim %s", ErrNotInstalled, bin, ShimBinary)
	}
	return bin, nil
}

// Endpoint is the CRI endpoint of the socket sock, as crictl's
// --runtime-endpoint and the kubelet's --container-runtime-endpoint take it.
func Endpoint(sock string) string { return "unix://" + sock }

// Daemon is a lab containerd this process started.
type Daemon struct {
	cfg     Config
	cmd     *exec.Cmd
	lock    *os.File
	exited  chan struct{}
	waitErr error
}

// Start claims the state directory's lab containerd (an flock on
// Layout.Lock(), so a second start is ErrRunning, as is a containerd that
// answers on the socket already), writes its files (Write, with mirror),
// then starts bin on them, its output to out. It returns once the process
// runs: Ready says when it answers.
func Start(ctx context.Context, c Config, bin, mirror string, out io.Writer) (*Daemon, *Written, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	lock, err := claim(c.Layout.Lock())
	if err != nil {
		return nil, nil, err
	}
	sock := c.Layout.Socket()
	if v, err := Version(ctx, sock); err == nil {
		lock.Close()
		return nil, nil, fmt.Errorf("%w: containerd %s answers on %s, started outside podlab containerd: use it (crictl --runtime-endpoint %s), or stop it first",
			ErrRunning, v.RuntimeVersion, sock, Endpoint(sock))
	}
	written, err := Write(c, mirror)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", c.Layout.Config())
	cmd.Stdout, cmd.Stderr = out, out
	// containerd dies with this process; the shims it starts do not (they
	// are their containers' parents, in sessions of their own).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	if err := lock.Truncate(0); err == nil {
		fmt.Fprintf(lock, "%d\n", cmd.Process.Pid)
	}
	d := &Daemon{cfg: c, cmd: cmd, lock: lock, exited: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		lock.Close()
		close(d.exited)
	}()
	return d, written, nil
}

// claim takes the flock on path, or says who holds it.
func claim(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("claiming the lab containerd: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claiming the lab containerd: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := "another podlab containerd"
			if pid := readPID(path); pid != 0 {
				who = "containerd pid " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("%w (%s holds %s): use it, or stop it first (Ctrl-C where it runs)", ErrRunning, who, path)
		}
		return nil, fmt.Errorf("claiming the lab containerd (%s): %w", path, err)
	}
	return f, nil
}

func readPID(path string) int {
	b, _ := os.ReadFile(path)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// PID is containerd's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Exited is closed when containerd has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Wait waits for containerd to exit and returns how it did.
func (d *Daemon) Wait() error {
	<-d.exited
	return d.waitErr
}

// Stop asks containerd to shut down (SIGTERM, as systemd stops it), waits
// up to grace, then kills it. Its pods' shims keep running (see the
// package doc); Stop returns nil once containerd has exited.
func (d *Daemon) Stop(grace time.Duration) error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	return nil
}

// dial is a CRI client connection to the socket sock.
func dial(sock string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(Endpoint(sock), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", sock, err)
	}
	return conn, nil
}

// Version asks the CRI on sock for its version (CRI Version), waiting at
// most a second.
func Version(ctx context.Context, sock string) (*runtimeapi.VersionResponse, error) {
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return nil, fmt.Errorf("%w: no socket at %s", ErrNotAnswering, sock)
	}
	conn, err := dial(sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %v", ErrNotAnswering, sock, err)
	}
	return v, nil
}

// Readiness is what the CRI said when it was ready.
type Readiness struct {
	Version *runtimeapi.VersionResponse
	// Conditions are CRI Status's: RuntimeReady and NetworkReady, true.
	Conditions []*runtimeapi.RuntimeCondition
}

// Ready waits until the CRI on sock answers and says RuntimeReady and
// NetworkReady (its CNI configuration loaded), as the kubelet waits for its
// runtime, or until ctx is done or timeout passes (ErrNotAnswering, with
// the last answer). exited, if not nil, ends the wait early: the process
// that should answer has exited.
func Ready(ctx context.Context, sock string, timeout time.Duration, exited <-chan struct{}) (*Readiness, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	var r Readiness
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			last = errors.New("containerd exited")
			return false, last
		default:
		}
		v, err := Version(ctx, sock)
		if status.Code(errors.Unwrap(err)) == codes.Unimplemented || strings.Contains(fmt.Sprint(err), "unknown service runtime.v1") {
			// containerd answers, without its CRI plugin: waiting will not help.
			last = fmt.Errorf("containerd answers without its CRI plugin (runtime.v1.RuntimeService): %v", err)
			return false, last
		}
		if err != nil {
			last = err
			return false, nil
		}
		conn, err := dial(sock)
		if err != nil {
			return false, err
		}
		defer conn.Close()
		st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			last = err
			return false, nil
		}
		for _, c := range st.GetStatus().GetConditions() {
			if !c.Status {
				last = fmt.Errorf("%s is false: %s %s", c.Type, c.Reason, c.Message)
				return false, nil
			}
		}
		r = Readiness{Version: v, Conditions: st.GetStatus().GetConditions()}
		return true, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return nil, fmt.Errorf("%w on %s after %s: %v (its log says why)", ErrNotAnswering, sock, timeout, last)
	}
	return &r, nil
}
