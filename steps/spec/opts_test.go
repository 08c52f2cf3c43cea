package spec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// applyEmpty runs one option on an empty spec, as containerd's tests do.
func applyEmpty(t *testing.T, opt oci.SpecOpts) (*specs.Spec, error) {
	t.Helper()
	s := &specs.Spec{}
	err := opt(context.Background(), nil, nil, s)
	return s, err
}

func mustApplyEmpty(t *testing.T, opt oci.SpecOpts) *specs.Spec {
	t.Helper()
	s, err := applyEmpty(t, opt)
	if err != nil {
		t.Fatalf("option on an empty spec: %v", err)
	}
	return s
}

// testRootfs writes a rootfs with /etc/passwd and /etc/group and returns it.
func testRootfs(t *testing.T) string {
	t.Helper()
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	writeFile(t, filepath.Join(rootfs, "etc", "passwd"), `root:x:0:0:root:/root:/bin/sh
# a comment
app:x:1000:1000::/home/app:/bin/sh
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
broken:x:notanumber:1::/:/bin/sh
`)
	writeFile(t, filepath.Join(rootfs, "etc", "group"), `root:x:0:
app:x:1000:
www-data:x:33:app
audio:x:29:app,www-data
staff:x:50:
`)
	return rootfs
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWithRelativeRootfs_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithRelativeRootfs())
	if s.Root == nil || s.Root.Path != "rootfs" {
		t.Fatalf("root = %+v, want path rootfs", s.Root)
	}
	// It rewrites an absolute path (what oci.WithRootFSPath would leave).
	s = &specs.Spec{Root: &specs.Root{Path: "/var/lib/x/rootfs", Readonly: true}}
	if err := WithRelativeRootfs()(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if s.Root.Path != "rootfs" || !s.Root.Readonly {
		t.Fatalf("root = %+v, want path rootfs, readonly kept", s.Root)
	}
}

func TestWithCgroupNamespace_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithCgroupNamespace())
	if s.Linux == nil || len(s.Linux.Namespaces) != 1 || s.Linux.Namespaces[0].Type != specs.CgroupNamespace || s.Linux.Namespaces[0].Path != "" {
		t.Fatalf("linux = %+v, want one new cgroup namespace", s.Linux)
	}
}

func TestWithCgroupfsMount_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithCgroupfsMount())
	// A read-only tmpfs first (what runc remounts read-only at the end:
	// on cgroup v1 the tmpfs it puts over the controllers), then the
	// read-only cgroup mount itself.
	want := []struct{ typ, source string }{{"tmpfs", "tmpfs"}, {"cgroup", "cgroup"}}
	if len(s.Mounts) != len(want) {
		t.Fatalf("mounts = %+v, want a read-only tmpfs then a read-only cgroup mount at /sys/fs/cgroup", s.Mounts)
	}
	for i, w := range want {
		m := s.Mounts[i]
		if m.Destination != "/sys/fs/cgroup" || m.Type != w.typ || m.Source != w.source || !slices.Contains(m.Options, "ro") || slices.Contains(m.Options, "rw") {
			t.Errorf("mount %d = %+v, want a read-only %s at /sys/fs/cgroup", i, m, w.typ)
		}
	}
	// Applying it twice does not mount twice.
	if err := WithCgroupfsMount()(context.Background(), nil, nil, s); err != nil || len(s.Mounts) != 2 {
		t.Fatalf("second apply: err %v, %d mounts", err, len(s.Mounts))
	}
}

func TestWithCgroupsPath_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithCgroupsPath("/podlab", "web-1"))
	if s.Linux == nil || s.Linux.CgroupsPath != "/podlab/web-1" {
		t.Fatalf("linux = %+v, want cgroupsPath /podlab/web-1", s.Linux)
	}
	for _, id := range []string{"", "..", ".", "../etc", "a/b", "-x", "a b", "a\x00"} {
		if _, err := applyEmpty(t, WithCgroupsPath("/podlab", id)); !errors.Is(err, ErrInvalidID) {
			t.Errorf("id %q: err = %v, want ErrInvalidID", id, err)
		}
	}
	if _, err := applyEmpty(t, WithCgroupsPath("podlab", "x")); err == nil {
		t.Error("relative parent: no error")
	}
}

func TestWithHostname_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithHostname("web-7d9f"))
	if s.Hostname != "web-7d9f" {
		t.Fatalf("hostname = %q", s.Hostname)
	}
	for _, h := range []string{"", "a b", "x/y", string(make([]byte, 65))} {
		if _, err := applyEmpty(t, WithHostname(h)); !errors.Is(err, ErrInvalidHostname) {
			t.Errorf("hostname %q: err = %v, want ErrInvalidHostname", h, err)
		}
	}
}

func TestWithProcessArgs_EmptySpec(t *testing.T) {
	ep := []string{"/docker-entrypoint.sh"}
	cmd := []string{"nginx", "-g", "daemon off;"}
	tests := []struct {
		name                           string
		entrypoint, cmd, command, args []string
		want                           []string
	}{
		{name: "image entrypoint and cmd", entrypoint: ep, cmd: cmd, want: []string{"/docker-entrypoint.sh", "nginx", "-g", "daemon off;"}},
		{name: "image cmd only", cmd: cmd, want: cmd},
		{name: "image entrypoint only", entrypoint: ep, want: ep},
		{name: "command replaces entrypoint and drops cmd", entrypoint: ep, cmd: cmd, command: []string{"sleep", "1"}, want: []string{"sleep", "1"}},
		{name: "command and args", entrypoint: ep, cmd: cmd, command: []string{"sh", "-c"}, args: []string{"echo a,b"}, want: []string{"sh", "-c", "echo a,b"}},
		{name: "args replace cmd after entrypoint", entrypoint: ep, cmd: cmd, args: []string{"nginx", "-T"}, want: []string{"/docker-entrypoint.sh", "nginx", "-T"}},
		{name: "args without entrypoint", cmd: cmd, args: []string{"echo", "hi"}, want: []string{"echo", "hi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustApplyEmpty(t, WithProcessArgs(tt.entrypoint, tt.cmd, tt.command, tt.args))
			if !slices.Equal(s.Process.Args, tt.want) {
				t.Fatalf("args = %q, want %q", s.Process.Args, tt.want)
			}
		})
	}
	// The option must not alias the image's slices.
	img := make([]string, 1, 4)
	img[0] = "/entry"
	s := mustApplyEmpty(t, WithProcessArgs(img, nil, nil, []string{"x"}))
	s.Process.Args[0] = "changed"
	if img[0] != "/entry" {
		t.Fatal("WithProcessArgs wrote into the image's ENTRYPOINT slice")
	}

	bad := []struct {
		name                           string
		entrypoint, cmd, command, args []string
	}{
		{name: "nothing at all"},
		{name: "empty command element", cmd: cmd, command: []string{""}},
		{name: "empty cmd element", cmd: []string{""}},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.name, func(t *testing.T) {
			_, err := applyEmpty(t, WithProcessArgs(tt.entrypoint, tt.cmd, tt.command, tt.args))
			if !errors.Is(err, ErrNoCommand) {
				t.Fatalf("err = %v, want ErrNoCommand", err)
			}
		})
	}
}

func TestWithEnv_EmptySpec(t *testing.T) {
	tests := []struct {
		name             string
		hostname         string
		image, overrides []string
		want             []string
	}{
		{name: "no image env: default PATH", want: []string{"PATH=" + DefaultPath}},
		{name: "hostname adds HOSTNAME", hostname: "web", want: []string{"PATH=" + DefaultPath, "HOSTNAME=web"}},
		{name: "image PATH kept", image: []string{"PATH=/app/bin", "A=1"}, want: []string{"PATH=/app/bin", "A=1"}},
		{name: "image HOSTNAME kept", hostname: "web", image: []string{"HOSTNAME=img"}, want: []string{"HOSTNAME=img", "PATH=" + DefaultPath}},
		{
			name: "overrides replace and append", hostname: "web",
			image: []string{"PATH=/x", "A=1", "B=2"}, overrides: []string{"A=override", "C=3", "HOSTNAME=mine", "D=with=equals"},
			want: []string{"PATH=/x", "A=override", "B=2", "HOSTNAME=mine", "C=3", "D=with=equals"},
		},
		{name: "empty value", overrides: []string{"EMPTY="}, want: []string{"PATH=" + DefaultPath, "EMPTY="}},
		{
			name:  "a later image name replaces an earlier one in place",
			image: []string{"A=1", "B=2", "A=3", "PATH=/p", "B=4"}, overrides: []string{"A=5"},
			want: []string{"A=5", "B=4", "PATH=/p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &specs.Spec{Hostname: tt.hostname}
			if err := WithEnv(tt.image, tt.overrides)(context.Background(), nil, nil, s); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Process.Env, tt.want) {
				t.Fatalf("env = %q, want %q", s.Process.Env, tt.want)
			}
		})
	}
	bad := map[string]struct{ image, overrides []string }{
		"override without =":  {overrides: []string{"JUSTAKEY"}},
		"override empty name": {overrides: []string{"=v"}},
		"override NUL":        {overrides: []string{"A=x\x00y"}},
		"image without =":     {image: []string{"garbage"}},
	}
	for name, tt := range bad {
		t.Run("bad/"+name, func(t *testing.T) {
			if _, err := applyEmpty(t, WithEnv(tt.image, tt.overrides)); !errors.Is(err, ErrInvalidEnv) {
				t.Fatalf("err = %v, want ErrInvalidEnv", err)
			}
		})
	}
}

// An image config may hold 200,000 environment entries (about 3 MB, under
// the 4 MiB config limit): merging them is linear, milliseconds, where a
// search of the list per entry took minutes. Half of them repeat a name, so
// the replacing path is exercised too.
func TestWithEnv_HugeImageEnvIsLinear(t *testing.T) {
	const n = 200_000
	image := make([]string, n)
	for i := range image {
		image[i] = fmt.Sprintf("K%d=%d", i%(n/2), i)
	}
	done := make(chan error, 1)
	s := &specs.Spec{Hostname: "big"}
	began := time.Now()
	go func() { done <- WithEnv(image, []string{"K0=override"})(context.Background(), nil, nil, s) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("merging %d image env entries took more than 5s: the merge is not linear", n)
	}
	t.Logf("merged %d entries in %s", n, time.Since(began))
	env := s.Process.Env
	if len(env) != n/2+2 || env[0] != "K0=override" || env[1] != fmt.Sprintf("K1=%d", n/2+1) ||
		env[n/2] != "PATH="+DefaultPath || env[n/2+1] != "HOSTNAME=big" {
		t.Errorf("merged env has %d entries, starting %q and ending %q", len(env), env[:2], env[len(env)-2:])
	}
}

func TestWithWorkingDir_EmptySpec(t *testing.T) {
	rootfs := t.TempDir()
	for name, target := range map[string]string{
		"fdlink":   "/proc/self/fd/7",
		"rellink":  "../../../proc/self/cwd",
		"hop":      "fdlink",
		"devfd":    "/dev/fd/5",
		"srv":      "/var/www",
		"loop":     "loop",
		"safe-dot": "./var/www/../www",
	} {
		if err := os.Symlink(target, filepath.Join(rootfs, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "var", "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ dir, want string }{
		{"", "/"},
		{"/", "/"},
		{"/app", "/app"},
		{"app/src", "/app/src"},
		{"/app/../srv/./x/", "/srv/x"},
		{"/procfs", "/procfs"},
		{"/proc/..", "/"},
		{"/fdlink/..", "/"}, // cleaned before runc sees it: runc goes to /
		{"/srv", "/srv"},
		{"/safe-dot", "/safe-dot"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			s := mustApplyEmpty(t, WithWorkingDir(rootfs, tt.dir))
			if s.Process.Cwd != tt.want {
				t.Fatalf("cwd = %q, want %q", s.Process.Cwd, tt.want)
			}
		})
	}
	bad := []string{
		"/proc/self/fd/7", "/proc", "/proc/1/cwd", "/../proc/self/fd/8", "proc/self/cwd", "/proc/../proc/self/fd/3",
		"/dev/fd/7", "/dev/stdin",
		"/fdlink", "/fdlink/fd", "/rellink", "/hop", "/devfd", "/srv/../fdlink",
	}
	for _, dir := range bad {
		t.Run("bad/"+dir, func(t *testing.T) {
			if _, err := applyEmpty(t, WithWorkingDir(rootfs, dir)); !errors.Is(err, ErrWorkdirInProc) {
				t.Fatalf("err = %v, want ErrWorkdirInProc", err)
			}
		})
	}
	t.Run("bad/symlink loop", func(t *testing.T) {
		if _, err := applyEmpty(t, WithWorkingDir(rootfs, "/loop")); err == nil {
			t.Fatal("no error for a symlink loop")
		}
	})
	t.Run("no rootfs checks the path only", func(t *testing.T) {
		if s := mustApplyEmpty(t, WithWorkingDir("", "/fdlink")); s.Process.Cwd != "/fdlink" {
			t.Fatalf("cwd = %q", s.Process.Cwd)
		}
		if _, err := applyEmpty(t, WithWorkingDir("", "/proc/self/fd/7")); !errors.Is(err, ErrWorkdirInProc) {
			t.Fatalf("err = %v, want ErrWorkdirInProc", err)
		}
	})
}

func TestWithUser_EmptySpec(t *testing.T) {
	rootfs := testRootfs(t)
	tests := []struct {
		user string
		want specs.User
	}{
		{"", specs.User{UID: 0, GID: 0}},
		{"root", specs.User{UID: 0, GID: 0, AdditionalGids: []uint32{0}}},
		{"app", specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 33, 29}}},
		{"www-data", specs.User{UID: 33, GID: 33, AdditionalGids: []uint32{33, 29}}},
		{"1000", specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 33, 29}}},
		{"4242", specs.User{UID: 4242, GID: 0}},
		{"4242:4343", specs.User{UID: 4242, GID: 4343}},
		{"4294967294", specs.User{UID: 4294967294, GID: 0}},
		{"app:staff", specs.User{UID: 1000, GID: 50, AdditionalGids: []uint32{50, 33, 29}}},
		{"app:7", specs.User{UID: 1000, GID: 7, AdditionalGids: []uint32{7, 33, 29}}},
		{"4242:staff", specs.User{UID: 4242, GID: 50}},
		{"1000:audio", specs.User{UID: 1000, GID: 29, AdditionalGids: []uint32{29, 33}}},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			s := mustApplyEmpty(t, WithUser(rootfs, tt.user))
			got := s.Process.User
			if got.UID != tt.want.UID || got.GID != tt.want.GID || !slices.Equal(got.AdditionalGids, tt.want.AdditionalGids) {
				t.Fatalf("user = %+v, want %+v", got, tt.want)
			}
		})
	}
	bad := []struct {
		user string
		want error
	}{
		{"nobody", ErrUnknownUser},
		{"broken", ErrUnknownUser}, // its line in /etc/passwd is malformed
		{"app:nogroup", ErrUnknownGroup},
		{"4242:nogroup", ErrUnknownGroup},
		{"4294967295", ErrIDOutOfRange},
		{"4294967296", ErrIDOutOfRange},
		{"99999999999999999999999", ErrIDOutOfRange},
		{"-1", ErrIDOutOfRange},
		{"+5", ErrIDOutOfRange},
		{"12abc", ErrIDOutOfRange},
		{"1000:-1", ErrIDOutOfRange},
		{"app:4294967296", ErrIDOutOfRange},
		{":100", ErrInvalidUser},
		{"app:", ErrInvalidUser},
		{"a:b:c", ErrInvalidUser},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.user, func(t *testing.T) {
			if _, err := applyEmpty(t, WithUser(rootfs, tt.user)); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWithUser_NoEtcFiles(t *testing.T) {
	rootfs := t.TempDir()
	s := mustApplyEmpty(t, WithUser(rootfs, "1000:1000"))
	if s.Process.User.UID != 1000 || s.Process.User.GID != 1000 || len(s.Process.User.AdditionalGids) != 0 {
		t.Fatalf("user = %+v, want 1000:1000", s.Process.User)
	}
	if _, err := applyEmpty(t, WithUser(rootfs, "app")); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("named user without /etc/passwd: err = %v, want ErrUnknownUser", err)
	}
	if _, err := applyEmpty(t, WithUser(rootfs, "1000:staff")); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("named group without /etc/group: err = %v, want ErrUnknownGroup", err)
	}
}

// A hostile image points /etc/passwd outside its rootfs, or makes it a FIFO
// that would block the reader: both are refused, never followed or opened.
func TestWithUser_UnsafePasswd(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "passwd")
	writeFile(t, outside, "evil:x:0:0::/:/bin/sh\n")

	tests := map[string]func(t *testing.T, etc string){
		"absolute symlink": func(t *testing.T, etc string) {
			if err := os.Symlink(outside, filepath.Join(etc, "passwd")); err != nil {
				t.Fatal(err)
			}
		},
		"relative symlink up": func(t *testing.T, etc string) {
			rel, err := filepath.Rel(etc, outside)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(rel, filepath.Join(etc, "passwd")); err != nil {
				t.Fatal(err)
			}
		},
		"symlinked etc": func(t *testing.T, etc string) {
			if err := os.Remove(etc); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(outside), etc); err != nil {
				t.Fatal(err)
			}
		},
		"fifo": func(t *testing.T, etc string) {
			if err := syscall.Mkfifo(filepath.Join(etc, "passwd"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"directory": func(t *testing.T, etc string) {
			if err := os.Mkdir(filepath.Join(etc, "passwd"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			rootfs := t.TempDir()
			etc := filepath.Join(rootfs, "etc")
			if err := os.Mkdir(etc, 0o755); err != nil {
				t.Fatal(err)
			}
			setup(t, etc)
			_, err := applyEmpty(t, WithUser(rootfs, "evil"))
			if !errors.Is(err, ErrUnsafeFile) {
				t.Fatalf("err = %v, want ErrUnsafeFile", err)
			}
		})
	}
	// A symlink that stays inside the rootfs is followed.
	rootfs := t.TempDir()
	writeFile(t, filepath.Join(rootfs, "usr", "share", "passwd"), "app:x:1000:1000::/:/bin/sh\n")
	if err := os.Mkdir(filepath.Join(rootfs, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../usr/share/passwd", filepath.Join(rootfs, "etc", "passwd")); err != nil {
		t.Fatal(err)
	}
	if s := mustApplyEmpty(t, WithUser(rootfs, "app")); s.Process.User.UID != 1000 {
		t.Fatalf("user = %+v, want uid 1000", s.Process.User)
	}
}

func TestWithCPULimit_EmptySpec(t *testing.T) {
	tests := []struct {
		q      string
		quota  int64
		shares uint64
	}{
		{"500m", 50000, 512},
		{"1", 100000, 1024},
		{"2.5", 250000, 2560},
		{"250m", 25000, 256},
		{"1m", 1000, 2}, // the kernel's minimum quota, the smallest shares
		{"0.1", 10000, 102},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			s := mustApplyEmpty(t, WithCPULimit(tt.q))
			c := s.Linux.Resources.CPU
			if *c.Quota != tt.quota || *c.Period != 100000 || *c.Shares != tt.shares {
				t.Fatalf("cpu = quota %d period %d shares %d, want %d 100000 %d", *c.Quota, *c.Period, *c.Shares, tt.quota, tt.shares)
			}
		})
	}
	if s := mustApplyEmpty(t, WithCPULimit("")); s.Linux != nil {
		t.Fatalf("empty cpu set %+v", s.Linux)
	}
	for _, q := range []string{"abc", "0", "-1", "-500m", "1Zi", "5 cpus", "9223372036854775807"} {
		t.Run("bad/"+q, func(t *testing.T) {
			if _, err := applyEmpty(t, WithCPULimit(q)); !errors.Is(err, ErrInvalidLimit) {
				t.Fatalf("err = %v, want ErrInvalidLimit", err)
			}
		})
	}
}

func TestWithMemoryLimit_EmptySpec(t *testing.T) {
	tests := []struct {
		q    string
		want int64
	}{
		{"128Mi", 128 << 20},
		{"1Gi", 1 << 30},
		{"1G", 1000000000},
		{"1.5Gi", 3 << 29},
		{"64M", 64000000},
		{"4096", 4096},
		{"0.5Ki", 512},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			s := mustApplyEmpty(t, WithMemoryLimit(tt.q))
			if got := *s.Linux.Resources.Memory.Limit; got != tt.want {
				t.Fatalf("limit = %d, want %d", got, tt.want)
			}
		})
	}
	if s := mustApplyEmpty(t, WithMemoryLimit("")); s.Linux != nil {
		t.Fatalf("empty memory set %+v", s.Linux)
	}
	for _, q := range []string{"lots", "0", "-128Mi", "128MB", "128 Mi", "100Ei"} {
		t.Run("bad/"+q, func(t *testing.T) {
			if _, err := applyEmpty(t, WithMemoryLimit(q)); !errors.Is(err, ErrInvalidLimit) {
				t.Fatalf("err = %v, want ErrInvalidLimit", err)
			}
		})
	}
}

func TestWithPidsLimit_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithPidsLimit(64))
	if *s.Linux.Resources.Pids.Limit != 64 {
		t.Fatalf("pids = %d, want 64", *s.Linux.Resources.Pids.Limit)
	}
	if s := mustApplyEmpty(t, WithPidsLimit(0)); s.Linux != nil {
		t.Fatalf("pids 0 set %+v", s.Linux)
	}
	if _, err := applyEmpty(t, WithPidsLimit(-1)); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("pids -1: err = %v, want ErrInvalidLimit", err)
	}
}

func TestWithOOMScoreAdj(t *testing.T) {
	for _, adj := range []int{-1000, -997, 0, 2, 999, 1000} {
		s := mustApplyEmpty(t, WithOOMScoreAdj(adj))
		if s.Process == nil || s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != adj {
			t.Errorf("WithOOMScoreAdj(%d): process %+v", adj, s.Process)
		}
	}
}

func TestWithOOMScoreAdj_Refused(t *testing.T) {
	for _, adj := range []int{-1001, 1001, -1 << 20} {
		if s, err := applyEmpty(t, WithOOMScoreAdj(adj)); err == nil {
			t.Errorf("WithOOMScoreAdj(%d) accepted: %+v", adj, s.Process)
		}
	}
}

func TestWithOCIVersion_EmptySpec(t *testing.T) {
	for _, v := range []string{"1.0.0", "1.1.0", "1.0.2-dev"} {
		s := mustApplyEmpty(t, WithOCIVersion(v))
		if s.Version != v {
			t.Errorf("WithOCIVersion(%q): ociVersion = %q", v, s.Version)
		}
	}
}

func TestWithOCIVersion_Bad(t *testing.T) {
	for name, v := range map[string]string{
		"empty":         "",
		"two parts":     "1.0",
		"not a number":  "1.x.0",
		"major 2":       "2.0.0",
		"leading v":     "v1.0.0",
		"empty segment": "1..0",
	} {
		t.Run(name, func(t *testing.T) {
			s := &specs.Spec{Version: specs.Version}
			err := WithOCIVersion(v)(context.Background(), nil, nil, s)
			if !errors.Is(err, ErrInvalidOCIVersion) {
				t.Fatalf("err = %v, want ErrInvalidOCIVersion", err)
			}
			if s.Version != specs.Version {
				t.Errorf("ociVersion changed to %q on bad input", s.Version)
			}
		})
	}
}

func TestWithSysctls_EmptySpec(t *testing.T) {
	s := mustApplyEmpty(t, WithSysctls(map[string]string{"net.core.somaxconn": "1024", "net/ipv4/ip_unprivileged_port_start": "80"}))
	if s.Linux == nil || len(s.Linux.Sysctl) != 2 || s.Linux.Sysctl["net.core.somaxconn"] != "1024" || s.Linux.Sysctl["net/ipv4/ip_unprivileged_port_start"] != "80" {
		t.Fatalf("linux = %+v, want the two sysctls", s.Linux)
	}
	if s := mustApplyEmpty(t, WithSysctls(nil)); s.Linux != nil && s.Linux.Sysctl != nil {
		t.Errorf("no sysctls: linux.sysctl = %v, want none", s.Linux.Sysctl)
	}
}

func TestWithSysctls_BadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sysctls map[string]string
	}{
		{"upper case", map[string]string{"Net.Core.Somaxconn": "1"}},
		{"a path out of /proc/sys", map[string]string{"../../etc/passwd": "x"}},
		{"empty segment", map[string]string{"net..core": "1"}},
		{"newline in the value", map[string]string{"net.core.somaxconn": "1\n2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := applyEmpty(t, WithSysctls(tc.sysctls)); err == nil {
				t.Errorf("WithSysctls(%q): no error", tc.sysctls)
			}
		})
	}
}
