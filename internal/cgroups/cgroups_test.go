package cgroups_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/cgroups"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// fakeTree writes files (path relative to root -> content; a trailing slash
// makes a directory) and returns root.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mounts(t *testing.T, root, mountinfo string) []cgroups.CgroupMount {
	t.Helper()
	m, err := cgroups.ParseCgroupMounts(strings.NewReader(strings.ReplaceAll(mountinfo, "ROOT", root)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func procCgroup(t *testing.T, s string) cgroups.ProcCgroup {
	t.Helper()
	pc, err := cgroups.ParseProcCgroup(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

const (
	v1Mountinfo = `25 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
31 23 0:28 / ROOT ro - tmpfs tmpfs ro,mode=755
32 31 0:29 / ROOT/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / ROOT/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / ROOT/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / ROOT/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
`
	v1Proc = `9:name=systemd:/podlab/web
8:pids:/podlab/web
4:memory:/podlab/web
2:cpu,cpuacct:/podlab/web
`
	unifiedMountinfo = "41 31 0:38 / ROOT/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	v2Mountinfo      = "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n26 25 0:23 / ROOT rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
)

func TestReadCgroup(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		mountinfo string
		proc      string
		layout    cgroups.CgroupVersion
		path      string
		dirs      []string // relative to the tree
		memory    string
		pids      string
		quota     string
		period    string
		memFile   string // relative to the tree
	}{
		{
			name: "v1",
			files: map[string]string{
				"memory/podlab/web/memory.limit_in_bytes":  "67108864\n",
				"pids/podlab/web/pids.max":                 "32\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_quota_us":  "50000\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_period_us": "100000\n",
				"systemd/podlab/web/":                      "",
			},
			mountinfo: v1Mountinfo, proc: v1Proc,
			layout: cgroups.CgroupV1, path: "/podlab/web",
			dirs:   []string{"cpu,cpuacct/podlab/web", "memory/podlab/web", "pids/podlab/web", "systemd/podlab/web"},
			memory: "67108864", pids: "32", quota: "50000", period: "100000",
			memFile: "memory/podlab/web/memory.limit_in_bytes",
		},
		{
			name: "v1 unlimited",
			files: map[string]string{
				"memory/podlab/web/memory.limit_in_bytes":  "9223372036854771712\n",
				"pids/podlab/web/pids.max":                 "max\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_quota_us":  "-1\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_period_us": "100000\n",
			},
			mountinfo: v1Mountinfo, proc: v1Proc,
			layout: cgroups.CgroupV1, path: "/podlab/web",
			dirs:   []string{"cpu,cpuacct/podlab/web", "memory/podlab/web", "pids/podlab/web"},
			memory: "max", pids: "max", quota: "max", period: "100000",
			memFile: "memory/podlab/web/memory.limit_in_bytes",
		},
		{
			name: "v2",
			files: map[string]string{
				"podlab/web/memory.max": "67108864\n",
				"podlab/web/pids.max":   "max\n",
				"podlab/web/cpu.max":    "50000 100000\n",
			},
			mountinfo: v2Mountinfo, proc: "0::/podlab/web\n",
			layout: cgroups.CgroupV2, path: "/podlab/web",
			dirs:   []string{"podlab/web"},
			memory: "67108864", pids: "max", quota: "50000", period: "100000",
			memFile: "podlab/web/memory.max",
		},
		{
			name: "v2 without limits",
			files: map[string]string{
				"podlab/web/memory.max": "max\n",
				"podlab/web/pids.max":   "16\n",
				"podlab/web/cpu.max":    "max 100000\n",
			},
			mountinfo: v2Mountinfo, proc: "0::/podlab/web\n",
			layout: cgroups.CgroupV2, path: "/podlab/web",
			dirs:   []string{"podlab/web"},
			memory: "max", pids: "16", quota: "max", period: "100000",
			memFile: "podlab/web/memory.max",
		},
		{
			name: "v2 mount showing a sub-tree (cgroup namespace)",
			files: map[string]string{
				"web/memory.max": "1048576\n",
				"web/pids.max":   "8\n",
			},
			mountinfo: "26 25 0:23 /kubepods ROOT rw - cgroup2 cgroup2 rw\n", proc: "0::/kubepods/web\n",
			layout: cgroups.CgroupV2, path: "/kubepods/web",
			dirs:   []string{"web"},
			memory: "1048576", pids: "8", quota: "unknown", period: "unknown",
			memFile: "web/memory.max",
		},
		{
			name: "hybrid",
			files: map[string]string{
				"memory/podlab/web/memory.limit_in_bytes":  "134217728\n",
				"pids/podlab/web/pids.max":                 "64\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_quota_us":  "25000\n",
				"cpu,cpuacct/podlab/web/cpu.cfs_period_us": "100000\n",
				"unified/podlab/web/cgroup.procs":          "",
				"unified/cgroup.controllers":               "\n",
			},
			mountinfo: v1Mountinfo + unifiedMountinfo, proc: v1Proc + "0::/podlab/web\n",
			layout: cgroups.CgroupHybrid, path: "/podlab/web",
			dirs:   []string{"cpu,cpuacct/podlab/web", "memory/podlab/web", "pids/podlab/web", "unified/podlab/web"},
			memory: "134217728", pids: "64", quota: "25000", period: "100000",
			memFile: "memory/podlab/web/memory.limit_in_bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeTree(t, tt.files)
			cg := cgroups.ReadCgroup(mounts(t, root, tt.mountinfo), procCgroup(t, tt.proc))
			if cg.Layout != tt.layout {
				t.Errorf("Layout = %s, want %s", cg.Layout, tt.layout)
			}
			if cg.Path != tt.path {
				t.Errorf("Path = %q, want %q", cg.Path, tt.path)
			}
			var want []string
			for _, d := range tt.dirs {
				want = append(want, filepath.Join(root, d))
			}
			if !slices.Equal(cg.Dirs, want) {
				t.Errorf("Dirs = %q, want %q", cg.Dirs, want)
			}
			for _, c := range []struct {
				name string
				got  cgroups.Limit
				want string
			}{{"memory", cg.Memory, tt.memory}, {"pids", cg.Pids, tt.pids}, {"cpu quota", cg.CPUQuota, tt.quota}, {"cpu period", cg.CPUPeriod, tt.period}} {
				if c.got.String() != c.want {
					t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
				}
			}
			if got := cg.Memory.File; got != filepath.Join(root, tt.memFile) {
				t.Errorf("memory file = %s, want %s", got, filepath.Join(root, tt.memFile))
			}
		})
	}
}

func TestParseCgroupMounts(t *testing.T) {
	in := `32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:7 - cgroup cgroup rw,cpu,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/x,name=systemd
41 31 0:38 / /mnt/with\040space rw - cgroup2 cgroup2 rw
42 31 0:39 / /proc rw - proc proc rw
garbage line
`
	got, err := cgroups.ParseCgroupMounts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d mounts, want 3: %+v", len(got), got)
	}
	if got[0].Version != 1 || !slices.Equal(got[0].Controllers, []string{"cpu", "cpuacct"}) {
		t.Errorf("mount 0 = %+v, want v1 [cpu cpuacct]", got[0])
	}
	if !slices.Equal(got[1].Controllers, []string{"name=systemd"}) {
		t.Errorf("mount 1 controllers = %q, want [name=systemd]", got[1].Controllers)
	}
	if got[2].Version != 2 || got[2].Mountpoint != "/mnt/with space" {
		t.Errorf("mount 2 = %+v, want cgroup2 at %q", got[2], "/mnt/with space")
	}
	if l := cgroups.CgroupLayout(got[1:2]); l != cgroups.CgroupNone {
		t.Errorf("layout of a name=systemd-only v1 mount = %s, want none", l)
	}
}

func TestParseProcCgroup(t *testing.T) {
	pc := procCgroup(t, "12:cpu,cpuacct:/a\n0::/b\n1:name=systemd:/c\n")
	want := cgroups.ProcCgroup{"cpu": "/a", "cpuacct": "/a", "": "/b", "name=systemd": "/c"}
	if len(pc) != len(want) {
		t.Fatalf("got %v, want %v", pc, want)
	}
	for k, v := range want {
		if pc[k] != v {
			t.Errorf("pc[%q] = %q, want %q", k, pc[k], v)
		}
	}
	for _, bad := range []string{"", "no colons here\n", "1:memory\n"} {
		if _, err := cgroups.ParseProcCgroup(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseProcCgroup(%q) succeeded, want an error", bad)
		}
	}
}

func TestAvailableControllers(t *testing.T) {
	t.Run("hybrid", func(t *testing.T) {
		root := fakeTree(t, map[string]string{"unified/cgroup.controllers": "\n"})
		got := cgroups.AvailableControllers(mounts(t, root, v1Mountinfo+unifiedMountinfo))
		for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
			if got[c] != cgroups.CgroupV1 {
				t.Errorf("%s = %q, want v1", c, got[c])
			}
		}
		if _, ok := got["name=systemd"]; ok {
			t.Errorf("name=systemd listed as a controller")
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := fakeTree(t, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"})
		got := cgroups.AvailableControllers(mounts(t, root, v2Mountinfo))
		for _, c := range []string{"memory", "pids", "cpu"} {
			if got[c] != cgroups.CgroupV2 {
				t.Errorf("%s = %q, want v2", c, got[c])
			}
		}
		if _, ok := got["hugetlb"]; ok {
			t.Errorf("hugetlb listed, but cgroup.controllers lacks it")
		}
	})
}

func TestRemoveCgroupDirs(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"memory/podlab/web/":   "",
		"memory/podlab/other/": "", // another container: /podlab stays in memory
		"pids/podlab/web/":     "",
		"unified/podlab/web/":  "",
	})
	ms := mounts(t, root, v1Mountinfo+unifiedMountinfo)
	removed, err := cgroups.RemoveCgroupDirs(ms, "/podlab/web")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"memory/podlab/web", "pids/podlab/web", "pids/podlab", "unified/podlab/web", "unified/podlab"}
	for i := range want {
		want[i] = filepath.Join(root, want[i])
	}
	slices.Sort(want)
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if _, err := os.Stat(filepath.Join(root, "memory/podlab/other")); err != nil {
		t.Errorf("the other container's cgroup is gone: %v", err)
	}
	for _, top := range []string{"memory", "pids", "unified"} {
		if _, err := os.Stat(filepath.Join(root, top)); err != nil {
			t.Errorf("hierarchy root %s removed: %v", top, err)
		}
	}
	if removed, err := cgroups.RemoveCgroupDirs(ms, "/"); err != nil || len(removed) != 0 {
		t.Errorf("RemoveCgroupDirs(/) = %q, %v; want nothing removed", removed, err)
	}
}

func TestRemoveCgroupDirsBelow(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"memory/podlab-aa/nodes/n/kubepods/pod1/c1/": "",
		"memory/podlab-bb/web/":                      "", // another state directory's
	})
	ms := mounts(t, root, v1Mountinfo)
	removed, err := cgroups.RemoveCgroupDirsBelow(ms, "/podlab-aa/nodes/n/kubepods/pod1/c1", "/podlab-aa/nodes/n/kubepods/pod1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(root, "memory/podlab-aa/nodes/n/kubepods/pod1/c1")}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q: the pod's cgroup stays", removed, want)
	}
	if _, err := cgroups.RemoveCgroupDirsBelow(ms, "/podlab-bb/web", "/podlab-aa"); err == nil {
		t.Error("removed a cgroup outside the runtime's parent")
	}
	if _, err := os.Stat(filepath.Join(root, "memory/podlab-bb/web")); err != nil {
		t.Errorf("another state directory's cgroup is gone: %v", err)
	}
	if removed, _ := cgroups.RemoveCgroupDirsBelow(ms, "/podlab-aa/nodes/n/kubepods/pod1", ""); len(removed) != 1 {
		t.Errorf("no parent: removed %q, want the leaf alone", removed)
	}
}

// TestReadProcessCgroup_Host reads this test's own cgroups from the real
// kernel: whatever the layout, the memory and pids files exist somewhere.
func TestReadProcessCgroup_Host(t *testing.T) {
	testenv.RequireRoot(t)
	ms, err := cgroups.HostCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	if cgroups.CgroupLayout(ms) == cgroups.CgroupNone {
		testenv.Missing(t, "no cgroup file system mounted")
	}
	cg, err := cgroups.ReadProcessCgroup(ms, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(cg.Dirs) == 0 {
		t.Errorf("no cgroup directories found for pid %d", os.Getpid())
	}
	if !cg.Pids.Known && !cg.Memory.Known {
		t.Errorf("read neither pids nor memory: %+v", cg)
	}
}

// EnterCgroup moves a running process into a new cgroup in every hierarchy
// runc uses (a v1 cpuset cgroup included: it gets its parent's cpus and
// mems); the kernel's /proc/<pid>/cgroup then names it there.
func TestEnterCgroup_Host(t *testing.T) {
	testenv.RequireRoot(t)
	ms, err := cgroups.HostCgroupMounts()
	if err != nil || cgroups.CgroupLayout(ms) == cgroups.CgroupNone {
		testenv.Missing(t, "no cgroup file system mounted")
	}
	l, err := statedir.New(testenv.StateDir(t)) // removes its cgroup root at the end
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	path := l.CgroupRoot() + "/pod/leaf"
	dirs, err := cgroups.EnterCgroup(ms, path, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cgroups.ParseProcCgroup(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("EnterCgroup reports no cgroup directory")
	}
	for _, m := range ms {
		key := ""
		if m.Version == 1 {
			if len(m.Controllers) == 0 || strings.HasPrefix(m.Controllers[0], "name=") {
				continue
			}
			key = m.Controllers[0]
		}
		if pc[key] != path {
			t.Errorf("/proc/%d/cgroup: %q in %s, want %s:\n%s", cmd.Process.Pid, pc[key], m.Mountpoint, path, b)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := cgroups.RemoveCgroupDirs(ms, path); err != nil {
		t.Error(err)
	}
}

func TestEnterCgroup_BadInput(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		mounts     []cgroups.CgroupMount
		want       string
	}{
		{"no path", "", []cgroups.CgroupMount{{Mountpoint: t.TempDir(), Root: "/", Version: 2}}, "no cgroup path"},
		{"no hierarchy", "/a/b", nil, "no cgroup hierarchy is mounted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := cgroups.EnterCgroup(tc.mounts, tc.path, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EnterCgroup(%q): %v, want an error saying %q", tc.path, err, tc.want)
			}
		})
	}
}

// KillCgroupProcs kills what each hierarchy's cgroup.procs of the path
// names, once each; a cgroup that does not exist holds nothing; "/" is
// refused (it would be every process of the hierarchy).
func TestKillCgroupProcs(t *testing.T) {
	top := t.TempDir()
	mounts := []cgroups.CgroupMount{
		{Mountpoint: filepath.Join(top, "cpu"), Root: "/", Version: 1, Controllers: []string{"cpu"}},
		{Mountpoint: filepath.Join(top, "unified"), Root: "/", Version: 2},
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill() })
	pid := sleeper.Process.Pid
	for _, m := range mounts {
		dir := m.Dir("/pod/sb")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprintf("%d\n", pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, path string
		want       []int
		wantErr    string
	}{
		{"a cgroup that does not exist", "/pod/other", nil, ""},
		{"the root", "/", nil, "no cgroup path given"},
		{"the leaf, named in two hierarchies", "/pod/sb", []int{pid}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroups.KillCgroupProcs(mounts, tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("KillCgroupProcs(%s): %v, want an error saying %q", tc.path, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("KillCgroupProcs(%s) = %v, %v; want %v", tc.path, got, err, tc.want)
			}
		})
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the process of the cgroup: %v, want it killed", err)
	}
}
