package spec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/podlab/podlab/internal/testenv"
)

// testBundle makes DIR/<name>/rootfs with testRootfs' /etc files.
func testBundle(t *testing.T, name string) string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(testRootfs(t), filepath.Join(bundle, "rootfs")); err != nil {
		t.Fatal(err)
	}
	return bundle
}

func nginxConfig() *v1.ConfigFile {
	return &v1.ConfigFile{
		OS:           "linux",
		Architecture: "amd64",
		Config: v1.Config{
			Entrypoint: []string{"/docker-entrypoint.sh"},
			Cmd:        []string{"nginx", "-g", "daemon off;"},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NGINX_VERSION=1.27.0"},
			WorkingDir: "/",
		},
	}
}

func TestGenerate(t *testing.T) {
	bundle := testBundle(t, "web")
	tests := []struct {
		name  string
		cfg   func(*v1.ConfigFile)
		opts  Options
		check func(t *testing.T, s *specs.Spec)
	}{
		{
			name: "image as built",
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "args", s.Process.Args, "/docker-entrypoint.sh", "nginx", "-g", "daemon off;")
				wantStrings(t, "env", s.Process.Env, nginxConfig().Config.Env[0], "NGINX_VERSION=1.27.0", "HOSTNAME=web")
				if s.Process.Cwd != "/" || s.Process.User.UID != 0 || s.Process.User.GID != 0 {
					t.Errorf("cwd %q user %+v, want / and 0:0", s.Process.Cwd, s.Process.User)
				}
			},
		},
		{
			name: "command replaces entrypoint, cmd ignored",
			opts: Options{Command: []string{"sleep", "3600"}},
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "args", s.Process.Args, "sleep", "3600")
			},
		},
		{
			name: "command and args",
			opts: Options{Command: []string{"sh", "-c"}, Args: []string{"echo a,b; sleep 1"}},
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "args", s.Process.Args, "sh", "-c", "echo a,b; sleep 1")
			},
		},
		{
			name: "args only: entrypoint + args",
			opts: Options{Args: []string{"nginx", "-T"}},
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "args", s.Process.Args, "/docker-entrypoint.sh", "nginx", "-T")
			},
		},
		{
			name: "env added and overriding",
			opts: Options{Env: []string{"NGINX_VERSION=override", "GREETING=hello"}},
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "env", s.Process.Env, nginxConfig().Config.Env[0], "NGINX_VERSION=override", "HOSTNAME=web", "GREETING=hello")
			},
		},
		{
			name: "image without env gets PATH",
			cfg:  func(c *v1.ConfigFile) { c.Config.Env = nil },
			check: func(t *testing.T, s *specs.Spec) {
				wantStrings(t, "env", s.Process.Env, "PATH="+DefaultPath, "HOSTNAME=web")
			},
		},
		{
			name: "image user by name",
			cfg:  func(c *v1.ConfigFile) { c.Config.User = "www-data" },
			check: func(t *testing.T, s *specs.Spec) {
				wantUser(t, s, 33, 33, 33, 29)
			},
		},
		{
			name: "option user overrides image user",
			cfg:  func(c *v1.ConfigFile) { c.Config.User = "www-data" },
			opts: Options{User: "app:staff"},
			check: func(t *testing.T, s *specs.Spec) {
				wantUser(t, s, 1000, 50, 50, 33, 29)
			},
		},
		{
			name: "numeric uid:gid needs no entry",
			opts: Options{User: "65534:65534"},
			check: func(t *testing.T, s *specs.Spec) {
				wantUser(t, s, 65534, 65534)
			},
		},
		{
			name: "workdir from image and from options",
			cfg:  func(c *v1.ConfigFile) { c.Config.WorkingDir = "/usr/share/nginx" },
			opts: Options{WorkingDir: "srv/www"},
			check: func(t *testing.T, s *specs.Spec) {
				if s.Process.Cwd != "/srv/www" {
					t.Errorf("cwd = %q, want /srv/www", s.Process.Cwd)
				}
			},
		},
		{
			name: "limits",
			opts: Options{CPU: "500m", Memory: "128Mi", Pids: 100},
			check: func(t *testing.T, s *specs.Spec) {
				r := s.Linux.Resources
				if *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.CPU.Shares != 512 {
					t.Errorf("cpu = %d/%d shares %d, want 50000/100000 shares 512", *r.CPU.Quota, *r.CPU.Period, *r.CPU.Shares)
				}
				if *r.Memory.Limit != 134217728 {
					t.Errorf("memory = %d, want 134217728", *r.Memory.Limit)
				}
				if *r.Pids.Limit != 100 {
					t.Errorf("pids = %d, want 100", *r.Pids.Limit)
				}
			},
		},
		{
			name: "no limits",
			check: func(t *testing.T, s *specs.Spec) {
				r := s.Linux.Resources
				if r.CPU != nil || r.Memory != nil || r.Pids != nil {
					t.Errorf("resources = %+v, want no cpu, memory, pids", r)
				}
			},
		},
		{
			name: "id defaults to the bundle name, hostname to the id",
			check: func(t *testing.T, s *specs.Spec) {
				if s.Linux.CgroupsPath != "/podlab/web" || s.Hostname != "web" {
					t.Errorf("cgroupsPath %q hostname %q, want /podlab/web and web", s.Linux.CgroupsPath, s.Hostname)
				}
			},
		},
		{
			name: "id and hostname options",
			opts: Options{ContainerID: "web-0a1b", Hostname: "web-pod"},
			check: func(t *testing.T, s *specs.Spec) {
				if s.Linux.CgroupsPath != "/podlab/web-0a1b" || s.Hostname != "web-pod" || !slices.Contains(s.Process.Env, "HOSTNAME=web-pod") {
					t.Errorf("cgroupsPath %q hostname %q env %q", s.Linux.CgroupsPath, s.Hostname, s.Process.Env)
				}
			},
		},
		{
			name:  "containerd defaults and podlab's additions",
			check: checkDefaults,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := nginxConfig()
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			s, err := Generate(context.Background(), cfg, bundle, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

// checkDefaults verifies what containerd's defaults and podlab's options give
// every container.
func checkDefaults(t *testing.T, s *specs.Spec) {
	t.Helper()
	if s.Version != specs.Version {
		t.Errorf("ociVersion = %q, want %q", s.Version, specs.Version)
	}
	if s.Root == nil || s.Root.Path != "rootfs" {
		t.Errorf("root = %+v, want the relative path rootfs", s.Root)
	}
	var types []specs.LinuxNamespaceType
	for _, ns := range s.Linux.Namespaces {
		if ns.Path != "" {
			t.Errorf("namespace %s joins %s, want a new one", ns.Type, ns.Path)
		}
		types = append(types, ns.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace,
		specs.MountNamespace, specs.NetworkNamespace, specs.CgroupNamespace} {
		if !slices.Contains(types, want) {
			t.Errorf("namespaces %v: no %s", types, want)
		}
	}
	if slices.Contains(types, specs.UserNamespace) {
		t.Errorf("namespaces %v: unexpected user namespace", types)
	}

	c := s.Process.Capabilities
	for _, want := range []string{"CAP_CHOWN", "CAP_SETUID", "CAP_SETGID", "CAP_NET_BIND_SERVICE", "CAP_KILL"} {
		if !slices.Contains(c.Bounding, want) || !slices.Contains(c.Effective, want) || !slices.Contains(c.Permitted, want) {
			t.Errorf("capabilities %+v: no %s", c, want)
		}
	}
	for _, no := range []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE", "CAP_DAC_READ_SEARCH"} {
		if slices.Contains(c.Bounding, no) {
			t.Errorf("bounding set has %s", no)
		}
	}
	if len(c.Inheritable) != 0 || len(c.Ambient) != 0 {
		t.Errorf("inheritable %v ambient %v, want both empty", c.Inheritable, c.Ambient)
	}
	if !s.Process.NoNewPrivileges {
		t.Error("noNewPrivileges is off")
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/sys/firmware"} {
		if !slices.Contains(s.Linux.MaskedPaths, p) {
			t.Errorf("maskedPaths %v: no %s", s.Linux.MaskedPaths, p)
		}
	}
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger"} {
		if !slices.Contains(s.Linux.ReadonlyPaths, p) {
			t.Errorf("readonlyPaths %v: no %s", s.Linux.ReadonlyPaths, p)
		}
	}
	if i := slices.IndexFunc(s.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_NOFILE" }); i < 0 || s.Process.Rlimits[i].Hard == 0 {
		t.Errorf("rlimits %+v: no RLIMIT_NOFILE", s.Process.Rlimits)
	}
	d := s.Linux.Resources.Devices
	if len(d) == 0 || d[0].Allow || d[0].Access != "rwm" || d[0].Major != nil || d[0].Minor != nil || (d[0].Type != "" && d[0].Type != "a") {
		t.Errorf("device rules %+v, want deny-all rwm first", d)
	}
	if i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/sys/fs/cgroup" }); i < 0 || !slices.Contains(s.Mounts[i].Options, "ro") {
		t.Errorf("mounts %+v: no read-only /sys/fs/cgroup", s.Mounts)
	}
	for _, want := range []string{"/proc", "/dev", "/dev/pts", "/sys"} {
		if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == want }) {
			t.Errorf("mounts: no %s", want)
		}
	}
	if !strings.HasPrefix(s.Linux.CgroupsPath, "/podlab/") {
		t.Errorf("cgroupsPath = %q, want /podlab/<id>", s.Linux.CgroupsPath)
	}
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func wantUser(t *testing.T, s *specs.Spec, uid, gid uint32, groups ...uint32) {
	t.Helper()
	u := s.Process.User
	if u.UID != uid || u.GID != gid || !slices.Equal(u.AdditionalGids, groups) {
		t.Errorf("user = %+v, want %d:%d groups %v", u, uid, gid, groups)
	}
}

// Hostile or broken image configs and options are refused while generating,
// before any container exists.
func TestGenerate_BadInput(t *testing.T) {
	bundle := testBundle(t, "web")
	tests := []struct {
		name   string
		cfg    func(*v1.ConfigFile)
		opts   Options
		bundle string
		want   error
	}{
		{name: "no entrypoint, no cmd", cfg: func(c *v1.ConfigFile) { c.Config.Entrypoint, c.Config.Cmd = nil, nil }, want: ErrNoCommand},
		{name: "workdir /proc/self/fd/7 (CVE-2024-21626)", cfg: func(c *v1.ConfigFile) { c.Config.WorkingDir = "/proc/self/fd/7" }, want: ErrWorkdirInProc},
		{name: "workdir via ..", cfg: func(c *v1.ConfigFile) { c.Config.WorkingDir = "/usr/../proc/self/fd/8" }, want: ErrWorkdirInProc},
		{name: "relative workdir into proc", cfg: func(c *v1.ConfigFile) { c.Config.WorkingDir = "../proc/1/cwd" }, want: ErrWorkdirInProc},
		{name: "workdir option /dev/fd", opts: Options{WorkingDir: "/dev/fd/7"}, want: ErrWorkdirInProc},
		{name: "uid past 2^32-1", cfg: func(c *v1.ConfigFile) { c.Config.User = "4294967296" }, want: ErrIDOutOfRange},
		{name: "unknown seccomp type", opts: Options{Seccomp: "runtime/default"}, want: ErrInvalidSeccompType},
		{name: "missing seccomp profile file", opts: Options{Seccomp: SeccompLocalhost, SeccompProfile: "/nonexistent/profile.json"}, want: ErrSeccompProfile},
		{name: "gid past 2^32-1", cfg: func(c *v1.ConfigFile) { c.Config.User = "0:4294967296" }, want: ErrIDOutOfRange},
		{name: "negative uid", cfg: func(c *v1.ConfigFile) { c.Config.User = "-1" }, want: ErrIDOutOfRange},
		{name: "garbage uid", opts: Options{User: "1e3"}, want: ErrIDOutOfRange},
		{name: "unknown user", cfg: func(c *v1.ConfigFile) { c.Config.User = "nginx" }, want: ErrUnknownUser},
		{name: "unknown group", cfg: func(c *v1.ConfigFile) { c.Config.User = "app:nginx" }, want: ErrUnknownGroup},
		{name: "malformed user", opts: Options{User: "app::x"}, want: ErrInvalidUser},
		{name: "bad cpu", opts: Options{CPU: "half"}, want: ErrInvalidLimit},
		{name: "zero cpu", opts: Options{CPU: "0m"}, want: ErrInvalidLimit},
		{name: "bad memory", opts: Options{Memory: "128MiB"}, want: ErrInvalidLimit},
		{name: "negative memory", opts: Options{Memory: "-1Gi"}, want: ErrInvalidLimit},
		{name: "negative pids", opts: Options{Pids: -5}, want: ErrInvalidLimit},
		{name: "bad env", opts: Options{Env: []string{"NOVALUE"}}, want: ErrInvalidEnv},
		{name: "bad image env", cfg: func(c *v1.ConfigFile) { c.Config.Env = append(c.Config.Env, "=x") }, want: ErrInvalidEnv},
		{name: "bad hostname", opts: Options{Hostname: "not a hostname"}, want: ErrInvalidHostname},
		{name: "bad id", opts: Options{ContainerID: "../../etc"}, want: ErrInvalidID},
		{name: "windows image", cfg: func(c *v1.ConfigFile) { c.OS = "windows" }, want: ErrNotLinux},
		{name: "no rootfs", bundle: t.TempDir(), want: ErrNoRootfs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := nginxConfig()
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			b := bundle
			if tt.bundle != "" {
				b = tt.bundle
			}
			s, err := Generate(context.Background(), cfg, b, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if s != nil {
				t.Fatalf("a spec came back with the error: %+v", s)
			}
			t.Logf("%v", err)
		})
	}
	t.Run("nil config", func(t *testing.T) {
		if _, err := Generate(context.Background(), nil, bundle, Options{}); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Generate(ctx, nginxConfig(), bundle, Options{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("ErrNoCommand says what to do", func(t *testing.T) {
		cfg := nginxConfig()
		cfg.Config.Entrypoint, cfg.Config.Cmd = nil, nil
		_, err := Generate(context.Background(), cfg, bundle, Options{})
		if err == nil || !strings.Contains(err.Error(), "--command") {
			t.Fatalf("err = %v, want a hint to pass --command", err)
		}
	})
}

func TestWrite(t *testing.T) {
	bundle := testBundle(t, "web")
	s, err := Generate(context.Background(), nginxConfig(), bundle, Options{Memory: "64Mi"})
	if err != nil {
		t.Fatal(err)
	}
	// An older config.json is replaced.
	writeFile(t, filepath.Join(bundle, "config.json"), "old")
	p, err := Write(bundle, s)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(bundle, "config.json") || !filepath.IsAbs(p) {
		t.Fatalf("path = %q", p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	got, err := Read(bundle)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Errorf("read back differs:\n%s\n%s", a, b)
	}
	entries, _ := os.ReadDir(bundle)
	for _, e := range entries {
		if e.Name() != "config.json" && e.Name() != "rootfs" {
			t.Errorf("stray file %s in the bundle", e.Name())
		}
	}
	if _, err := Write(filepath.Join(bundle, "missing"), s); err == nil {
		t.Error("writing into a missing directory: no error")
	}
}

// The generated config.json is valid by the runtime-spec's own JSON schema.
func TestGenerate_MatchesSchema(t *testing.T) {
	sch := runtimeSpecSchema(t)
	bundle := testBundle(t, "web")
	s, err := Generate(context.Background(), nginxConfig(), bundle, Options{
		User: "app", CPU: "250m", Memory: "64Mi", Pids: 32, Env: []string{"A=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Write(bundle, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateFile(sch, p); err != nil {
		t.Fatalf("config.json does not match the runtime-spec schema: %v", err)
	}

	// The check itself can fail: a broken spec is rejected.
	s.Process.User.UID = 0
	s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "bogus"})
	if _, err := Write(bundle, s); err != nil {
		t.Fatal(err)
	}
	if err := validateFile(sch, p); err == nil {
		t.Fatal("the schema accepted a namespace of type bogus")
	}
}

func runtimeSpecSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/opencontainers/runtime-spec")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		testenv.Missing(t, "locating runtime-spec in the module cache: %v", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "schema", "config-schema.json")
	if _, err := os.Stat(file); err != nil {
		testenv.Missing(t, "runtime-spec schema: %v", err)
	}
	// A file URL, so that the schema's relative $refs (defs.json,
	// config-linux.json) load from beside it. The files are draft-04; some
	// (config-vm.json) do not say so.
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.UseLoader(specSchemaLoader{})
	sch, err := c.Compile("file://" + filepath.ToSlash(file))
	if err != nil {
		t.Fatalf("compiling %s: %v", file, err)
	}
	return sch
}

// specSchemaLoader loads the schema files by file URL, mending one typo of
// runtime-spec v1.3.0 that gojsonschema (the spec's own validator) tolerates
// and a strict validator does not: defs.json's "$ref": "#definitions/uint32"
// (for "#/definitions/uint32").
type specSchemaLoader struct{}

func (specSchemaLoader) Load(url string) (any, error) {
	file, err := jsonschema.FileLoader{}.ToFile(url)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte(`"#definitions/`), []byte(`"#/definitions/`))
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

func validateFile(sch *jsonschema.Schema, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return err
	}
	return sch.Validate(doc)
}

func TestExplain(t *testing.T) {
	bundle := testBundle(t, "web")
	s, err := Generate(context.Background(), nginxConfig(), bundle, Options{User: "app", CPU: "500m", Memory: "128Mi", Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Explain(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		`root.path "rootfs"`,
		"pid     new the app is PID 1",
		"network new its own network stack: only lo",
		"cgroup  new",
		"uid 1000, gid 1000, groups [1000 33 29]",
		"134217728 bytes (128 MiB): memory.max (v2) / memory.limit_in_bytes (v1)",
		"OOM killer",
		"quota 50000µs per 100000µs period = 0.5 CPUs",
		"pids    64: pids.max",
		"CAP_NET_BIND_SERVICE   bind ports below 1024",
		"NOT granted",
		"CAP_SYS_ADMIN",
		"inheritable 0",
		"noNewPrivileges",
		"/proc/kcore",
		"/proc/sysrq-trigger",
		"RLIMIT_NOFILE soft 1024 hard 1024",
		"deny  a *:* rwm (every device)",
		"cgroupsPath /podlab/web",
		`hostname "web"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q", want)
		}
	}
	// Every capability granted has a meaning.
	if strings.Contains(out, "(unknown capability)") {
		t.Errorf("a granted capability has no explanation:\n%s", out)
	}
	// CAP_SYS_ADMIN is listed only as not granted.
	if i := strings.Index(out, "CAP_SYS_ADMIN"); i < strings.Index(out, "NOT granted") {
		t.Errorf("CAP_SYS_ADMIN appears before NOT granted:\n%s", out)
	}
	if testing.Verbose() {
		t.Log("\n" + out)
	}
}

func TestExplain_NoLimitsAndNil(t *testing.T) {
	var buf bytes.Buffer
	if err := Explain(&buf, &specs.Spec{}); err != nil {
		t.Fatal(err)
	}
	if err := Explain(&buf, nil); err != nil {
		t.Fatal(err)
	}
	bundle := testBundle(t, "web")
	s, err := Generate(context.Background(), nginxConfig(), bundle, Options{})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := Explain(&buf, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"memory  no limit", "cpu     no quota", "pids    no limit", "uid 0 without a user namespace is the host's root"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("explanation lacks %q", want)
		}
	}
}
