package lesson

// The checks of the lessons about the container runtime (pull, unpack,
// spec, runc) and of the cleanup.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// The container the runtime lessons (07 to 09) make, and its limits.
const (
	helloID     = "hello"
	helloMemory = 64 << 20 // --memory 64Mi
	helloPids   = 64       // --pids 64
	helloQuota  = 50000    // --cpu 500m: 50000µs per 100000µs
)

// layout is the probed state directory's layout.
func (p *probe) layout() statedir.Layout { return statedir.Layout{Dir: filepath.Clean(p.env.StateDir)} }

// helloCgroup is the cgroup of lesson 09's container: <cgroup root>/hello.
func (p *probe) helloCgroup() string { return p.layout().CgroupRoot() + "/" + helloID }

// runtime is the OCI runtime binary, "" when none is found (runc.Doctor
// reports that; runc commands fail with it).
func (p *probe) runtime() string {
	bin, _ := runc.FindRuntime(p.env.Runtime)
	return bin
}

func (p *probe) bundle() string { return p.layout().Bundle(helloID) }

// store opens the content store, without making one where there is none.
func (p *probe) store() (*pull.Store, error) {
	dir := p.layout().ContentDir()
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return nil, fail("no content store at %s: pull an image, `podlab pull nginx --registry-mirror http://$REGISTRY`", dir)
	}
	return pull.OpenStore(dir)
}

// 06: pull.
func pullChecks() []check {
	return []check{
		{"nginx is in the content store", func(ctx context.Context, p *probe) error {
			s, err := p.store()
			if err != nil {
				return err
			}
			if _, err := s.Image("nginx"); err != nil {
				return fail("%v: `podlab pull nginx --registry-mirror http://$REGISTRY`", err)
			}
			return nil
		}},
		{"podlab/hello:1.0 is in the content store", func(ctx context.Context, p *probe) error {
			s, err := p.store()
			if err != nil {
				return err
			}
			imgs, err := s.List()
			if err != nil {
				return err
			}
			for _, i := range imgs {
				if strings.HasSuffix(i.Repository, "/podlab/hello") && i.Tag == "1.0" {
					return nil
				}
			}
			return fail("no podlab/hello:1.0 in %s: `podlab pull $REGISTRY/podlab/hello:1.0`", s.Dir())
		}},
		{"every blob's sha256 is its name", func(ctx context.Context, p *probe) error {
			s, err := p.store()
			if err != nil {
				return err
			}
			dir := filepath.Join(s.Dir(), "blobs", "sha256")
			entries, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := ctx.Err(); err != nil {
					return err
				}
				sum, err := sha256File(filepath.Join(dir, e.Name()))
				if err != nil {
					return err
				}
				if sum != e.Name() {
					return fail("%s hashes to sha256:%s: the blob was changed; remove the image (`podlab rmi REF`) and pull it again", filepath.Join(dir, e.Name()), sum)
				}
			}
			return nil
		}},
	}
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// 07: unpack.
func unpackChecks() []check {
	unpack := "`podlab unpack $REGISTRY/podlab/hello:1.0 --bundle $PODLAB_STATE_DIR/bundles/hello --force`"
	return []check{
		{"bundle hello holds the image's rootfs", func(ctx context.Context, p *probe) error {
			if fi, err := os.Stat(filepath.Join(p.bundle(), "rootfs", "hello")); err != nil || !fi.Mode().IsRegular() {
				return fail("no %s: %s", filepath.Join(p.bundle(), "rootfs", "hello"), unpack)
			}
			return nil
		}},
		{"the bundle is private (mode 0700)", func(ctx context.Context, p *probe) error {
			fi, err := os.Stat(p.bundle())
			if err != nil {
				return fail("no bundle %s: %s", p.bundle(), unpack)
			}
			if fi.Mode().Perm() != 0o700 {
				return fail("%s has mode %#o: unpack makes it 0700 (only root may enter): %s", p.bundle(), fi.Mode().Perm(), unpack)
			}
			return nil
		}},
		{"the whiteout removed /etc/motd", func(ctx context.Context, p *probe) error {
			rootfs := filepath.Join(p.bundle(), "rootfs")
			if _, err := os.Stat(filepath.Join(rootfs, "etc")); err != nil {
				return fail("no %s/etc: %s", rootfs, unpack)
			}
			if _, err := os.Lstat(filepath.Join(rootfs, "etc", "motd")); !errors.Is(err, fs.ErrNotExist) {
				return fail("%s/etc/motd is there: layer 4's etc/.wh.motd should have deleted it: %s", rootfs, unpack)
			}
			return nil
		}},
		{"the opaque whiteout emptied /srv/www but for the new index.html", func(ctx context.Context, p *probe) error {
			dir := filepath.Join(p.bundle(), "rootfs", "srv", "www")
			entries, err := os.ReadDir(dir)
			if err != nil {
				return fail("no %s: %s", dir, unpack)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, []string{"index.html"}) {
				return fail("%s holds %q, want only index.html: %s", dir, got, unpack)
			}
			return nil
		}},
	}
}

// 08: the spec.
func specChecks() []check {
	write := "`podlab spec --bundle $PODLAB_STATE_DIR/bundles/hello --image $REGISTRY/podlab/hello:1.0 --memory 64Mi --pids 64 --cpu 500m`"
	read := func(p *probe) (*specs.Spec, error) {
		path := filepath.Join(p.bundle(), "config.json")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fail("no %s: %s", path, write)
		}
		var s specs.Spec
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fail("%s is not an OCI runtime spec (%v): %s", path, err, write)
		}
		return &s, nil
	}
	return []check{
		{"config.json is an OCI runtime spec", func(ctx context.Context, p *probe) error {
			_, err := read(p)
			return err
		}},
		{"the spec asks for the limits (64Mi memory, 64 pids, half a CPU)", func(ctx context.Context, p *probe) error {
			s, err := read(p)
			if err != nil {
				return err
			}
			var r specs.LinuxResources
			if s.Linux != nil && s.Linux.Resources != nil {
				r = *s.Linux.Resources
			}
			switch {
			case r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != helloMemory:
				return fail("linux.resources.memory.limit is not %d: %s", helloMemory, write)
			case r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != helloPids:
				return fail("linux.resources.pids.limit is not %d: %s", helloPids, write)
			case r.CPU == nil || r.CPU.Quota == nil || *r.CPU.Quota != helloQuota:
				return fail("linux.resources.cpu.quota is not %d: %s", helloQuota, write)
			}
			return nil
		}},
		{"no inheritable capabilities, and noNewPrivileges", func(ctx context.Context, p *probe) error {
			s, err := read(p)
			if err != nil {
				return err
			}
			if s.Process == nil || !s.Process.NoNewPrivileges {
				return fail("process.noNewPrivileges is not true: %s", write)
			}
			if c := s.Process.Capabilities; c != nil && (len(c.Inheritable) > 0 || len(c.Ambient) > 0) {
				return fail("inheritable %q, ambient %q: a container gets none: %s", c.Inheritable, c.Ambient, write)
			}
			return nil
		}},
		{"cgroupsPath is <state cgroup root>/" + helloID, func(ctx context.Context, p *probe) error {
			s, err := read(p)
			if err != nil {
				return err
			}
			if s.Linux == nil || s.Linux.CgroupsPath != p.helloCgroup() {
				return fail("linux.cgroupsPath is not %s (the state directory's cgroup root, `podlab doctor` shows it): %s", p.helloCgroup(), write)
			}
			return nil
		}},
	}
}

// 09: runc.
func runcChecks() []check {
	start := "`podlab runc create hello --bundle $PODLAB_STATE_DIR/bundles/hello`, then `podlab runc start hello`"
	state := func(ctx context.Context, p *probe) (*runc.State, error) {
		r := p.layout().Runtime()
		rt := &runc.Runtime{Binary: p.runtime(), StateDir: r.Dir, CgroupParent: r.CgroupParent}
		st, err := rt.State(ctx, helloID)
		if errors.Is(err, runc.ErrContainerNotFound) {
			return nil, fail("no container hello: %s", start)
		}
		if err != nil {
			return nil, err
		}
		if st.Status != "running" {
			return nil, fail("container hello is %s: delete it (`podlab runc delete --force hello`), then %s", st.Status, start)
		}
		return st, nil
	}
	return []check{
		{"container hello is running", func(ctx context.Context, p *probe) error {
			_, err := state(ctx, p)
			return err
		}},
		{"the kernel holds its limits in its cgroup files", func(ctx context.Context, p *probe) error {
			st, err := state(ctx, p)
			if err != nil {
				return err
			}
			cg := st.Cgroup
			switch {
			case cg == nil:
				return fail("pid %d has no cgroup podlab can read", st.Pid)
			case !cg.Memory.Known || cg.Memory.Unlimited || cg.Memory.Value != helloMemory:
				return fail("%s says %s, want %d: write the spec with --memory 64Mi and create the container again", cg.Memory.File, cg.Memory, helloMemory)
			case !cg.Pids.Known || cg.Pids.Unlimited || cg.Pids.Value != helloPids:
				return fail("%s says %s, want %d: write the spec with --pids 64 and create the container again", cg.Pids.File, cg.Pids, helloPids)
			}
			return nil
		}},
		{"its process has no inheritable capabilities and no new privileges", func(ctx context.Context, p *probe) error {
			st, err := state(ctx, p)
			if err != nil {
				return err
			}
			status, err := procStatus(st.Pid)
			if err != nil {
				return err
			}
			if status["CapInh"] != "0000000000000000" || status["NoNewPrivs"] != "1" {
				return fail("/proc/%d/status says CapInh %s, NoNewPrivs %s: want 0 and 1, as config.json asks", st.Pid, status["CapInh"], status["NoNewPrivs"])
			}
			return nil
		}},
		{"the app's greeting is in the container's log", func(ctx context.Context, p *probe) error {
			st, err := state(ctx, p)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(st.LogPath)
			if err != nil || !strings.Contains(string(b), "Hello from podlab/hello") {
				return fail("no greeting in %q: was the container started (`podlab runc start hello`)?", st.LogPath)
			}
			return nil
		}},
	}
}

// procStatus reads /proc/<pid>/status into its fields.
func procStatus(pid int) (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

// keptByReset reports whether cleaning up leaves name in the state
// directory: the demo images `make images` built, and the .deb files it
// downloaded.
func keptByReset(name string) bool { return slices.Contains(statedir.KeptEntries(), name) }

// 13: cleanup.
func cleanupChecks() []check {
	return []check{
		{"no container is left in runc", func(ctx context.Context, p *probe) error {
			roots := []string{p.layout().Runtime().RuncRoot()}
			nodes, _ := p.layout().Nodes()
			for _, n := range nodes {
				roots = append(roots, n.RuncRoot())
			}
			var left []string
			for _, root := range roots {
				entries, _ := os.ReadDir(root)
				for _, e := range entries {
					if e.IsDir() {
						left = append(left, filepath.Join(root, e.Name()))
					}
				}
			}
			if len(left) > 0 {
				return fail("runc still knows %s: `podlab reset --yes`", strings.Join(left, ", "))
			}
			return nil
		}},
		{"nothing is mounted under the state directory", func(ctx context.Context, p *probe) error {
			mounts, err := mountsUnder(p.env.StateDir)
			if err != nil {
				return err
			}
			if len(mounts) > 0 {
				return fail("still mounted: %s (pod namespaces pinned by bind mounts): `podlab reset --yes`", strings.Join(mounts, ", "))
			}
			return nil
		}},
		{"the state directory is empty (but for the demo images)", func(ctx context.Context, p *probe) error {
			entries, err := os.ReadDir(p.env.StateDir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			var left []string
			for _, e := range entries {
				if !keptByReset(e.Name()) {
					left = append(left, e.Name())
				}
			}
			if len(left) > 0 {
				return fail("%s still holds %s: `podlab reset --yes`", p.env.StateDir, strings.Join(left, ", "))
			}
			return nil
		}},
	}
}

// mountsUnder lists the mount points under dir, from /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeOctal(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeOctal undoes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
