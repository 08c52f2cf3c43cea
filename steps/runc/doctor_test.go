package runc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

func TestVulnerableRunc(t *testing.T) {
	tests := []struct {
		version    string
		vulnerable bool
	}{
		{"1.1.5", true}, // Debian 12
		{"1.1.5+ds1", true},
		{"1.0.0-rc93", true},
		{"1.1.15", true},
		{"1.2.0", true},
		{"1.2.7", true},
		{"1.2.8", false},
		{"1.2.10", false},
		{"1.3.0-rc.1", true},
		{"1.3.0", true},
		{"1.3.2", true},
		{"1.3.3", false},
		{"v1.3.4", false},
		{"1.4.0-rc.1", true},
		{"1.4.0-rc.2", true},
		{"1.4.0-rc.3", false},
		{"1.4.0-rc.10", false},
		{"1.4.0", false},
		{"1.5.3", false},
		{"2.0.0", false},
		{"0.1.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			got, err := runc.VulnerableRunc(tt.version)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.vulnerable {
				t.Errorf("VulnerableRunc(%q) = %v, want %v", tt.version, got, tt.vulnerable)
			}
		})
	}
	for _, bad := range []string{"", "1", "one.two.three", "1.2.3-", "1.2.3.4"} {
		if _, err := runc.VulnerableRunc(bad); err == nil {
			t.Errorf("VulnerableRunc(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseRuntimeVersion(t *testing.T) {
	tests := []struct{ in, name, version string }{
		{"runc version 1.5.3\nspec: 1.3.0\ngo: go1.26.8\n", "runc", "1.5.3"},
		{"runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\n", "runc", "1.1.5+ds1"},
		{"crun version 1.8.1\ncommit: abc\n", "crun", "1.8.1"},
		{"", "", ""},
	}
	for _, tt := range tests {
		name, version := runc.ParseRuntimeVersion(tt.in)
		if name != tt.name || version != tt.version {
			t.Errorf("ParseRuntimeVersion(%q) = %q, %q; want %q, %q", tt.in, name, version, tt.name, tt.version)
		}
	}
}

func goodFacts() runc.Facts {
	yes := true
	return runc.Facts{
		EUID:           0,
		Runtime:        "/work/main/bin/runc",
		RuntimeVersion: "runc version 1.5.3\nspec: 1.3.0\n",
		RuntimeSeccomp: &yes,
		Cgroups: []runc.CgroupMount{
			{Mountpoint: "/sys/fs/cgroup/memory", Root: "/", Version: 1, Controllers: []string{"memory"}},
			{Mountpoint: "/sys/fs/cgroup/unified", Root: "/", Version: 2},
		},
		Controllers: map[string]runc.CgroupVersion{"memory": "v1", "pids": "v1", "cpu": "v1"},
		Namespaces:  map[string]bool{"pid": true, "ipc": true, "uts": true, "mnt": true, "net": true, "cgroup": true, "user": true},
		Seccomp:     true,
		Pigz:        "/usr/bin/pigz",
		Snapshotter: "overlayfs",
		Handlers: []runc.HandlerFacts{
			{Handler: handler("runsc"), Path: "/usr/bin/runsc", Version: "runsc version 0.0~20221219.0"},
			{Handler: handler("crun"), Path: "/usr/bin/crun", Version: "crun version 1.8.1",
				Err: &runc.RefusalError{Msg: "crun 1.8.1 refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, /sys/fs/cgroup/unified): use runc or a pure cgroup v2 host"}},
		},
	}
}

func handler(name string) runc.Handler {
	h, _ := runc.LookupHandler(runc.DefaultHandlers("runc"), name)
	return h
}

func TestDiagnose(t *testing.T) {
	no := false
	tests := []struct {
		name   string
		change func(*runc.Facts)
		check  string      // the finding to look at
		status runc.Status // its expected status
		text   string      // in its Detail or Fix
		failed bool        // Failed(findings)
	}{
		{"all good", func(*runc.Facts) {}, "runtime", runc.StatusOK, "1.5.3", false},
		{"hybrid cgroups", func(*runc.Facts) {}, "cgroups", runc.StatusOK, "hybrid", false},
		{"v2 cgroups", func(f *runc.Facts) {
			f.Cgroups = []runc.CgroupMount{{Mountpoint: "/sys/fs/cgroup", Root: "/", Version: 2}}
		}, "cgroups", runc.StatusOK, "cgroup v2", false},
		{"not root", func(f *runc.Facts) { f.EUID = 1000 }, "root", runc.StatusFail, "sudo", true},
		{"no runtime", func(f *runc.Facts) { f.Runtime, f.RuntimeVersion = "", "" }, "runtime", runc.StatusFail, "make deps", true},
		{"runtime not executable", func(f *runc.Facts) {
			f.Runtime, f.RuntimeVersion, f.RuntimeErr = "/nope/runc", "", errors.New("no such file")
		}, "runtime", runc.StatusFail, "/nope/runc", true},
		{"Debian runc 1.1.5", func(f *runc.Facts) { f.RuntimeVersion = "runc version 1.1.5+ds1\n" }, "runtime", runc.StatusWarn, "CVE-2025-31133", false},
		{"runc 1.3.2", func(f *runc.Facts) { f.RuntimeVersion = "runc version 1.3.2\n" }, "runtime", runc.StatusWarn, "make deps", false},
		{"crun", func(f *runc.Facts) { f.RuntimeVersion = "crun version 1.8.1\n" }, "runtime", runc.StatusOK, "crun", false},
		{"runc without seccomp", func(f *runc.Facts) { f.RuntimeSeccomp = &no }, "runtime seccomp", runc.StatusWarn, "libseccomp", false},
		{"no cgroups", func(f *runc.Facts) { f.Cgroups, f.Controllers = nil, nil }, "cgroups", runc.StatusFail, "mount", true},
		{"no pids controller", func(f *runc.Facts) { delete(f.Controllers, "pids") }, "cgroup pids", runc.StatusFail, "subtree_control", true},
		{"no cgroup namespace", func(f *runc.Facts) { delete(f.Namespaces, "cgroup") }, "namespaces", runc.StatusFail, "cgroup", true},
		{"no seccomp", func(f *runc.Facts) { f.Seccomp = false }, "seccomp", runc.StatusFail, "CONFIG_SECCOMP", true},
		{"no pigz", func(f *runc.Facts) { f.Pigz = "" }, "pigz", runc.StatusWarn, "apt-get install pigz", false},
		{"overlayfs", func(*runc.Facts) {}, "overlay", runc.StatusOK, "snapshotter overlayfs", false},
		{"no overlayfs", func(f *runc.Facts) {
			f.Snapshotter, f.SnapshotterWhy = "native", errors.New("overlayfs cannot be used in /x: no such device")
		}, "overlay", runc.StatusWarn, "full copy", false},
		{"runsc installed", func(*runc.Facts) {}, "handler runsc", runc.StatusOK, "runsc version 0.0~20221219.0", false},
		{"crun on a hybrid host", func(*runc.Facts) {}, "handler crun", runc.StatusWarn,
			"crun 1.8.1 refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, /sys/fs/cgroup/unified): use runc or a pure cgroup v2 host", false},
		{"crun not installed", func(f *runc.Facts) {
			f.Handlers[1].Err, f.Handlers[1].Path = runc.ErrRuntimeNotFound, ""
		}, "handler crun", runc.StatusWarn, "apt-get install crun", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFacts()
			tt.change(&f)
			fs := runc.Diagnose(f)
			if got := runc.Failed(fs); got != tt.failed {
				t.Errorf("Failed = %v, want %v: %+v", got, tt.failed, fs)
			}
			for _, fd := range fs {
				if fd.Check != tt.check {
					continue
				}
				if fd.Status != tt.status {
					t.Errorf("%s: status %s, want %s (%s)", fd.Check, fd.Status, tt.status, fd.Detail)
				}
				if !strings.Contains(fd.Detail+" "+fd.Fix, tt.text) {
					t.Errorf("%s: %q / %q lacks %q", fd.Check, fd.Detail, fd.Fix, tt.text)
				}
				if fd.Status != runc.StatusOK && fd.Fix == "" {
					t.Errorf("%s: a problem without a fix", fd.Check)
				}
				return
			}
			t.Errorf("no %q finding in %+v", tt.check, fs)
		})
	}
}

// TestDoctor_Host checks this machine with the real runtime.
func TestDoctor_Host(t *testing.T) {
	bin := testenv.Runc(t)
	fs := runc.Doctor(context.Background(), bin)
	var runtime *runc.Finding
	for i := range fs {
		t.Logf("%-16s %-4s %s", fs[i].Check, fs[i].Status, fs[i].Detail)
		if fs[i].Check == "runtime" {
			runtime = &fs[i]
		}
	}
	if runtime == nil || runtime.Status == runc.StatusFail || !strings.Contains(runtime.Detail, bin) {
		t.Errorf("runtime finding = %+v, want %s found", runtime, bin)
	}
	if os.Geteuid() == 0 && fs[0].Status != runc.StatusOK {
		t.Errorf("root finding = %+v as root", fs[0])
	}
	// crun: on a host whose cgroups it refuses, the one line that says why
	if mode, err := runc.CgroupModeAt(runc.CgroupMountRoot); err == nil && mode == runc.CgroupHybridWithControllers {
		found := false
		for _, f := range fs {
			if f.Check == "handler crun" {
				found = true
				if f.Status != runc.StatusWarn || !strings.Contains(f.Detail, "refuses hosts with hybrid cgroups") && !strings.Contains(f.Detail, "not installed") {
					t.Errorf("crun on this hybrid host: %+v", f)
				}
			}
		}
		if !found {
			t.Errorf("no crun finding")
		}
	}
	if missing := runc.Doctor(context.Background(), "/nonexistent/runc"); !runc.Failed(missing) {
		t.Errorf("Doctor with a missing runtime did not fail")
	}
}
