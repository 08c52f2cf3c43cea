package spec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
)

// runc runs the generated config.json unmodified, and what the process sees
// from inside matches the spec: hostname, ids, capability sets,
// no_new_privs, its own cgroup namespace and its limits.
func TestGenerate_RuncRunsIt(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.Runc(t)
	goBin := testenv.LookPath(t, "go")

	cases := []struct {
		name    string
		user    string // Options.User; the image says "app"
		seccomp string // Options.Seccomp
		want    map[string]string
	}{
		{
			name: "image user app",
			want: map[string]string{
				"uid": "1000", "gid": "1000", "groups": "[29 33 1000]",
				"CapPrm": "0000000000000000", "CapEff": "0000000000000000", // non-root: execve grants none
			},
		},
		{
			name: "root",
			user: "0",
			want: map[string]string{
				"uid": "0", "gid": "0", "groups": "[0]",
				// Docker's and containerd's default set, as the kernel shows it.
				"CapPrm": "00000000a80425fb", "CapEff": "00000000a80425fb",
			},
		},
		{
			// The kernel refuses what containerd's profile does not allow,
			// before the call's own checks (without the filter, unshare
			// fails with EINVAL in a multi-threaded Go program, keyctl
			// with ENOKEY).
			name:    "root with seccomp RuntimeDefault",
			user:    "0",
			seccomp: SeccompRuntimeDefault,
			want: map[string]string{
				"uid": "0", "CapEff": "00000000a80425fb",
				"Seccomp": "2", "unshare": "EPERM", "keyctl": "EPERM",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "podlab-spec-test-" + randomHex(t)
			bundle := testBundle(t, id)
			rootfs := filepath.Join(bundle, "rootfs")
			if err := os.MkdirAll(filepath.Join(rootfs, "work"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(rootfs, 0o755); err != nil {
				t.Fatal(err)
			}
			build := exec.Command(goBin, "build", "-o", filepath.Join(rootfs, "probe"), "./testdata/probe")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("building the probe: %v\n%s", err, out)
			}

			cfg := &v1.ConfigFile{OS: "linux", Config: v1.Config{
				Entrypoint: []string{"/probe"},
				Cmd:        []string{"from-the-image"},
				Env:        []string{"PATH=/usr/bin:/bin", "GREETING=image"},
				User:       "app",
				WorkingDir: "/work",
			}}
			s, err := Generate(context.Background(), cfg, bundle, Options{
				Args:     []string{"from-args"},
				Env:      []string{"GREETING=hello"},
				User:     tc.user,
				Hostname: "probe-host",
				CPU:      "500m",
				Memory:   "64Mi",
				Pids:     32,
				Seccomp:  tc.seccomp,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Write(bundle, s); err != nil {
				t.Fatal(err)
			}

			runcRoot := t.TempDir()
			t.Cleanup(func() { cleanupContainer(t, runc, runcRoot, id) })
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, runc, "--root", runcRoot, "run", "--bundle", bundle, id)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("runc run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			got := parseProbe(stdout.String())
			t.Logf("probe output:\n%s", stdout.String())
			if stderr.Len() > 0 {
				t.Logf("runc stderr:\n%s", stderr.String())
			}

			want := map[string]string{
				"hostname":     "probe-host",
				"cwd":          "/work",
				"pid":          "1",
				"args":         `["/probe" "from-args"]`,
				"env.HOSTNAME": "probe-host",
				"env.PATH":     "/usr/bin:/bin",
				"env.GREETING": "hello",
				"NoNewPrivs":   "1",
				"Seccomp":      "0", // no filter unless asked for: Kubernetes' default
				"CapInh":       "0000000000000000",
				"CapAmb":       "0000000000000000",
				"CapBnd":       fmt.Sprintf("%016x", capMask(t, s.Process.Capabilities.Bounding)),
				"cgroup2":      "/", // its own cgroup namespace
				// the whole of /sys/fs/cgroup is read-only, as containerd's
				// (on cgroup v1, runc's tmpfs over the controllers too)
				"cgroupfs.mkdir":  "EROFS",
				"cgroupfs.create": "EROFS",
				"limit.memory":    strconv.FormatInt(64<<20, 10),
				"limit.pids":      "32",
			}
			for k, v := range tc.want {
				want[k] = v
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if got["CapBnd"] != "00000000a80425fb" {
				t.Errorf("CapBnd = %s, want containerd's default 00000000a80425fb", got["CapBnd"])
			}
			// v2 shows "50000 100000", v1 the quota alone.
			if q := got["limit.cpu"]; q != "50000 100000" && q != "50000" {
				t.Errorf("cpu quota = %q, want 50000 per 100000", q)
			}
		})
	}
}

func parseProbe(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// capMask is the kernel's bit mask of the named capabilities.
func capMask(t *testing.T, names []string) uint64 {
	t.Helper()
	bits := map[string]int{
		"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_FSETID": unix.CAP_FSETID,
		"CAP_FOWNER": unix.CAP_FOWNER, "CAP_MKNOD": unix.CAP_MKNOD, "CAP_NET_RAW": unix.CAP_NET_RAW,
		"CAP_SETGID": unix.CAP_SETGID, "CAP_SETUID": unix.CAP_SETUID, "CAP_SETFCAP": unix.CAP_SETFCAP,
		"CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE,
		"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_KILL": unix.CAP_KILL, "CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
	}
	var m uint64
	for _, n := range names {
		b, ok := bits[n]
		if !ok {
			t.Fatalf("capMask: add %s to the table", n)
		}
		m |= 1 << b
	}
	return m
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// cleanupContainer deletes the container and the empty cgroups runc leaves
// behind (/sys/fs/cgroup/<controller>/podlab/<id>, and the cgroup2 one).
// The shared /podlab parents stay: other containers may live there.
func cleanupContainer(t *testing.T, runc, root, id string) {
	t.Helper()
	if out, err := exec.Command(runc, "--root", root, "delete", "--force", id).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "does not exist") {
		t.Logf("runc delete: %v: %s", err, out)
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", strings.TrimPrefix(DefaultCgroupParent, "/"), id))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(DefaultCgroupParent, "/"), id))
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			t.Errorf("removing cgroup %s: %v", d, err)
		}
	}
}
