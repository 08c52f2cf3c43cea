package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/vishvananda/netlink"

	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
)

// LabTraces lists what of a state directory is on the host, outside its
// files: links (its lab bridge, its nodes' veths) and their routes, iptables
// rules (filter and nat) naming it or them, mounts under it, its machines'
// network namespaces and cgroups under its root. A test of join, leave or
// reset wants it empty after: nothing left behind.
func LabTraces(t testing.TB, state string, nodes ...string) []string {
	t.Helper()
	l := statedir.Layout{Dir: state}
	var out []string
	names := []string{machine.BridgeName(l)}
	for _, n := range nodes {
		names = append(names, machine.VethName(l, n))
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range links {
		if slices.Contains(names, k.Attrs().Name) {
			out = append(out, "link "+k.Attrs().Name)
			routes, _ := netlink.RouteList(k, netlink.FAMILY_V4)
			for _, r := range routes {
				out = append(out, "route "+r.String())
			}
		}
	}
	for _, table := range []string{"filter", "nat"} {
		rules, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range strings.Split(string(rules), "\n") {
			if strings.Contains(r, state) || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(r, n) }) {
				out = append(out, "iptables "+r)
			}
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		out = append(out, "mount "+m.Mountpoint)
	}
	for _, n := range nodes {
		if _, err := os.Lstat(l.Node(n).MachineNetns()); err == nil {
			out = append(out, "netns "+l.Node(n).MachineNetns())
		}
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	hierarchies = append(hierarchies, "/sys/fs/cgroup")
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, l.CgroupRoot())); err == nil {
			out = append(out, "cgroup "+filepath.Join(h, l.CgroupRoot()))
		}
	}
	return out
}
