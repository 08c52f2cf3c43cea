package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tree writes files (path -> content) below a new temporary root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	mountinfoV2 = `25 1 0:23 / / rw - overlay overlay rw
31 25 0:28 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw,nsdelegate
`
	// runc on a v1 host without a cgroup namespace: each hierarchy shows the
	// container's own cgroup, bind-mounted at the usual place.
	mountinfoV1Runc = `25 1 0:23 / / rw - overlay overlay rw
31 25 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw
32 31 0:29 /podlab/web /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory
33 31 0:30 /podlab/web /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 /podlab/web /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids
35 31 0:32 /podlab/web /sys/fs/cgroup/systemd ro - cgroup cgroup rw,name=systemd
`
	mountinfoHybrid = `31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw
32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`
)

func TestReadLimits(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // Version Path memory pids cpu, as formatted below
	}{
		{
			name: "v2 in a container with a cgroup namespace",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"proc/self/mountinfo":      mountinfoV2,
				"sys/fs/cgroup/memory.max": "67108864\n",
				"sys/fs/cgroup/pids.max":   "32\n",
				"sys/fs/cgroup/cpu.max":    "50000 100000\n",
			},
			want: "v2 / mem=67108864@/sys/fs/cgroup/memory.max pids=32@/sys/fs/cgroup/pids.max cpu=50000/100000@/sys/fs/cgroup/cpu.max",
		},
		{
			name: "v2 on a host, no namespace, unlimited",
			files: map[string]string{
				"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
				"proc/self/mountinfo":                       mountinfoV2,
				"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
				"sys/fs/cgroup/kubepods/pod1/c1/pids.max":   "max\n",
				"sys/fs/cgroup/kubepods/pod1/c1/cpu.max":    "max 100000\n",
			},
			want: "v2 /kubepods/pod1/c1 mem=max@/sys/fs/cgroup/kubepods/pod1/c1/memory.max pids=max@/sys/fs/cgroup/kubepods/pod1/c1/pids.max cpu=max@/sys/fs/cgroup/kubepods/pod1/c1/cpu.max",
		},
		{
			name: "v1 under runc without a cgroup namespace",
			files: map[string]string{
				"proc/self/cgroup":                            "6:pids:/podlab/web\n4:memory:/podlab/web\n2:cpu,cpuacct:/podlab/web\n1:name=systemd:/podlab/web\n",
				"proc/self/mountinfo":                         mountinfoV1Runc,
				"sys/fs/cgroup/memory/memory.limit_in_bytes":  "9223372036854771712\n",
				"sys/fs/cgroup/pids/pids.max":                 "100\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "-1\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
			},
			want: "v1 /podlab/web mem=max@/sys/fs/cgroup/memory/memory.limit_in_bytes pids=100@/sys/fs/cgroup/pids/pids.max cpu=max@/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us",
		},
		{
			name: "hybrid host: controllers in v1, an empty v2 hierarchy",
			files: map[string]string{
				"proc/self/cgroup":                               "8:pids:/p/c\n4:memory:/p/c\n1:cpu:/p/c\n2:cpuacct:/p/c\n0::/p/c\n",
				"proc/self/mountinfo":                            mountinfoHybrid,
				"sys/fs/cgroup/memory/p/c/memory.limit_in_bytes": "134217728\n",
				"sys/fs/cgroup/pids/p/c/pids.max":                "max\n",
				"sys/fs/cgroup/cpu/p/c/cpu.cfs_quota_us":         "150000\n",
				"sys/fs/cgroup/cpu/p/c/cpu.cfs_period_us":        "100000\n",
				"sys/fs/cgroup/unified/p/c/cgroup.procs":         "1\n",
			},
			want: "hybrid /p/c mem=134217728@/sys/fs/cgroup/memory/p/c/memory.limit_in_bytes pids=max@/sys/fs/cgroup/pids/p/c/pids.max cpu=150000/100000@/sys/fs/cgroup/cpu/p/c/cpu.cfs_quota_us",
		},
		{
			name: "v1 without mountinfo: the usual mount points",
			files: map[string]string{
				"proc/self/cgroup":                            "4:memory:/\n3:cpu,cpuacct:/\n2:pids:/\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":  "1048576\n",
				"sys/fs/cgroup/pids/pids.max":                 "7\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "25000\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
			},
			want: "v1 / mem=1048576@/sys/fs/cgroup/memory/memory.limit_in_bytes pids=7@/sys/fs/cgroup/pids/pids.max cpu=25000/100000@/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us",
		},
		{
			name: "v2 without mountinfo",
			files: map[string]string{
				"proc/self/cgroup":                 "0::/\n",
				"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
				"sys/fs/cgroup/memory.max":         "2048\n",
				"sys/fs/cgroup/pids.max":           "5\n",
				"sys/fs/cgroup/cpu.max":            "200000 100000\n",
			},
			want: "v2 / mem=2048@/sys/fs/cgroup/memory.max pids=5@/sys/fs/cgroup/pids.max cpu=200000/100000@/sys/fs/cgroup/cpu.max",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := readLimits(tree(t, tt.files))
			if l.Err != nil {
				t.Fatal(l.Err)
			}
			if got := summary(t, l); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func summary(t *testing.T, l Limits) string {
	t.Helper()
	for _, err := range []error{l.Memory.Err, l.Pids.Err, l.CPU.Err} {
		if err != nil {
			t.Fatalf("reading a limit: %v", err)
		}
	}
	val := func(x Limit) string {
		if x.Max {
			return "max@" + x.File
		}
		return itoa(x.Value) + "@" + x.File
	}
	cpu := "max@" + l.CPU.File
	if !l.CPU.Max {
		cpu = itoa(l.CPU.Quota) + "/" + itoa(l.CPU.Period) + "@" + l.CPU.File
	}
	return strings.Join([]string{l.Version, l.Path, "mem=" + val(l.Memory), "pids=" + val(l.Pids), "cpu=" + cpu}, " ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestReadLimits_Bad(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string // in Limits.Err, or in the memory limit's error
	}{
		{"no /proc/self/cgroup", map[string]string{"etc/hostname": "x"}, "no such file"},
		{"empty /proc/self/cgroup", map[string]string{"proc/self/cgroup": ""}, "lists no cgroup"},
		{"v2 not mounted", map[string]string{"proc/self/cgroup": "0::/\n"}, "v2 hierarchy is not mounted"},
		{"memory not mounted", map[string]string{"proc/self/cgroup": "4:memory:/x\n"}, "memory hierarchy is not mounted"},
		{"garbage limit", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountinfoV2,
			"sys/fs/cgroup/memory.max": "lots\n",
		}, "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := readLimits(tree(t, tt.files))
			err := l.Err
			if err == nil {
				err = l.Memory.Err
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/sys/fs/cgroup/a\040b`); got != "/sys/fs/cgroup/a b" {
		t.Errorf("unescape = %q", got)
	}
}
