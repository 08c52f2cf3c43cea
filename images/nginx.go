package images

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NginxRef is the demo nginx image. Docker Hub keeps its official images
// under "library/", so a runtime asking a mirror for "nginx" asks for
// library/nginx:latest: built here, it is what `podlab pull nginx` gets.
const NginxRef = "library/nginx:latest"

// nginxPackages are the Debian packages whose files make the nginx image.
func nginxPackages() []string { return []string{"nginx", "nginx-common"} }

// libPackages names the Debian package of each shared library nginx needs,
// for a machine that lacks one of them.
func libPackages() map[string]string {
	return map[string]string{
		"libc.so.6":             "libc6",
		"ld-linux-x86-64.so.2":  "libc6",
		"ld-linux-aarch64.so.1": "libc6",
		"libcrypt.so.1":         "libcrypt1",
		"libpcre2-8.so.0":       "libpcre2-8-0",
		"libssl.so.3":           "libssl3",
		"libcrypto.so.3":        "libssl3",
		"libz.so.1":             "zlib1g",
	}
}

// skippedPaths are package files a container has no use for: init scripts
// and systemd units (a container has no init system), log rotation, firewall
// profiles, documentation, man pages, editor syntax files, crash hooks.
func skippedPaths() []string {
	return []string{
		"etc/init.d", "etc/default", "etc/logrotate.d", "etc/ufw", "lib/systemd",
		"usr/share/doc", "usr/share/man", "usr/share/vim", "usr/share/apport", "usr/share/lintian",
	}
}

// NginxRootOptions are the inputs of PrepareNginxRoot.
type NginxRootOptions struct {
	// CacheDir keeps the downloaded .deb files; what is already there is not
	// downloaded again. Required.
	CacheDir string
	// LibDirs are the directories of this machine searched for nginx's
	// shared libraries. Empty means the usual ones (/lib/x86_64-linux-gnu,
	// /usr/lib/x86_64-linux-gnu, /lib64, ...). A library found in none is
	// taken from its Debian package.
	LibDirs []string
	// Log receives one line per step (downloads, extractions, libraries).
	Log io.Writer
}

// NginxRoot is a directory holding nginx's files as the packages would
// install them, plus the shared libraries the binary needs.
type NginxRoot struct {
	Dir  string
	Debs []string // the .deb files extracted into Dir
	Libs []Lib    // the shared libraries copied into Dir
}

// Lib is one shared library copied into an NginxRoot.
type Lib struct {
	Name string // the name the binary asks for (DT_NEEDED): "libssl.so.3"
	Path string // where it is in the image: "lib/x86_64-linux-gnu/libssl.so.3"
	From string // the file it was copied from, or the .deb it came out of
}

// PrepareNginxRoot fills dir (which must be empty or absent) with nginx:
// `apt-get download nginx nginx-common` into opts.CacheDir (when not there
// yet), `dpkg-deb -x` of both into dir, then the shared libraries the binary
// needs, found as ldd would (the ELF's DT_NEEDED entries, recursively, and
// its interpreter, the loader /lib64/ld-linux-x86-64.so.2).
func PrepareNginxRoot(ctx context.Context, dir string, opts NginxRootOptions) (*NginxRoot, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("preparing the nginx root: no .deb cache directory given")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("preparing the nginx root: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("preparing the nginx root: %w", err)
	}
	debs, err := FetchDebs(ctx, opts.CacheDir, nginxPackages(), opts.Log)
	if err != nil {
		return nil, err
	}
	root := &NginxRoot{Dir: dir, Debs: debs}
	for _, deb := range debs {
		if err := extractDeb(ctx, deb, dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "extracted %s into %s\n", filepath.Base(deb), dir)
	}
	root.Libs, err = copyLibs(ctx, dir, "usr/sbin/nginx", opts)
	if err != nil {
		return nil, err
	}
	return root, nil
}

// FetchDebs returns the .deb file of each package in cacheDir, downloading
// the missing ones with `apt-get download` (and, if apt knows no such
// package yet, `apt-get update` first).
func FetchDebs(ctx context.Context, cacheDir string, pkgs []string, log io.Writer) ([]string, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the .deb cache: %w", err)
	}
	var missing []string
	for _, p := range pkgs {
		if cachedDeb(cacheDir, p) == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "apt-get download %s (into %s)\n", strings.Join(missing, " "), cacheDir)
		if err := aptGet(ctx, cacheDir, append([]string{"download"}, missing...)...); err != nil {
			fmt.Fprintf(log, "apt-get download failed, running apt-get update once: %v\n", err)
			if err := aptGet(ctx, cacheDir, "update"); err != nil {
				return nil, fmt.Errorf("apt-get update: %w", err)
			}
			if err := aptGet(ctx, cacheDir, append([]string{"download"}, missing...)...); err != nil {
				return nil, fmt.Errorf("downloading %s: %w", strings.Join(missing, " "), err)
			}
		}
	}
	debs := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		deb := cachedDeb(cacheDir, p)
		if deb == "" {
			return nil, fmt.Errorf("apt-get download %s left no %s_*.deb in %s", p, p, cacheDir)
		}
		if !slices.Contains(missing, p) {
			fmt.Fprintf(log, "using cached %s\n", deb)
		}
		debs = append(debs, deb)
	}
	return debs, nil
}

// cachedDeb is the newest-named <pkg>_<version>_<arch>.deb in dir, or "".
func cachedDeb(dir, pkg string) string {
	m, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	if len(m) == 0 {
		return ""
	}
	sort.Strings(m)
	return m[len(m)-1]
}

func aptGet(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-q"}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func extractDeb(ctx context.Context, deb, dir string) error {
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dpkg-deb -x %s %s: %w\n%s", deb, dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// multiarch is Debian's directory name for this architecture's libraries.
func multiarch() string {
	if goarch() == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// copyLibs copies into root/lib/<multiarch>/ every shared library the binary
// root/bin needs, directly or through another library, and puts its
// interpreter (the loader) where the binary asks for it.
func copyLibs(ctx context.Context, root, bin string, opts NginxRootOptions) ([]Lib, error) {
	dirs := opts.LibDirs
	if len(dirs) == 0 {
		ma := multiarch()
		dirs = []string{"/lib/" + ma, "/usr/lib/" + ma, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	}
	interp, needed, err := elfDeps(filepath.Join(root, bin))
	if err != nil {
		return nil, fmt.Errorf("reading the libraries %s needs: %w", bin, err)
	}
	if interp != "" {
		needed = append(needed, path.Base(interp))
	}

	found := map[string]string{}  // library name -> file
	origin := map[string]string{} // library name -> where it came from, for people
	var fromDebs string           // a directory with extracted library packages, when needed
	defer func() {
		if fromDebs != "" {
			os.RemoveAll(fromDebs)
		}
	}()
	for len(needed) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := needed[0]
		needed = needed[1:]
		if _, ok := found[name]; ok {
			continue
		}
		file, from := findLib(name, dirs), ""
		if file == "" {
			if fromDebs == "" {
				if fromDebs, err = os.MkdirTemp("", "podlab-libdebs-"); err != nil {
					return nil, err
				}
			}
			if file, from, err = libFromDeb(ctx, name, fromDebs, opts); err != nil {
				return nil, err
			}
		}
		found[name] = file
		if from == "" {
			from = file
		}
		origin[name] = from
		_, more, err := elfDeps(file)
		if err != nil {
			return nil, fmt.Errorf("reading the libraries %s needs: %w", file, err)
		}
		needed = append(needed, more...)
	}

	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	libDir := path.Join("lib", multiarch())
	var libs []Lib
	for _, n := range names {
		l := Lib{Name: n, Path: path.Join(libDir, n), From: origin[n]}
		if err := copyFile(found[n], filepath.Join(root, l.Path)); err != nil {
			return nil, fmt.Errorf("copying library %s: %w", n, err)
		}
		fmt.Fprintf(opts.Log, "library %-22s from %s\n", n, l.From)
		libs = append(libs, l)
	}
	if interp != "" && path.Dir(strings.TrimPrefix(interp, "/")) != libDir {
		link := filepath.Join(root, interp)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return nil, err
		}
		os.Remove(link)
		if err := os.Symlink("/"+path.Join(libDir, path.Base(interp)), link); err != nil {
			return nil, fmt.Errorf("linking the loader %s: %w", interp, err)
		}
	}
	return libs, nil
}

// elfDeps reads an ELF file's interpreter and needed libraries.
func elfDeps(file string) (interp string, needed []string, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return "", nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	return interp, needed, err
}

// findLib is the real file (symlinks resolved) of library name in dirs, or "".
func findLib(name string, dirs []string) string {
	for _, d := range dirs {
		p, err := filepath.EvalSymlinks(filepath.Join(d, name))
		if err != nil {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// libFromDeb downloads the Debian package holding library name and extracts
// it into dir, for a machine that does not have the library itself.
func libFromDeb(ctx context.Context, name, dir string, opts NginxRootOptions) (file, from string, err error) {
	pkg, ok := libPackages()[name]
	if !ok {
		return "", "", fmt.Errorf("library %s is not on this machine (looked in %s) and podlab does not know its Debian package", name, strings.Join(opts.LibDirs, ", "))
	}
	debs, err := FetchDebs(ctx, opts.CacheDir, []string{pkg}, opts.Log)
	if err != nil {
		return "", "", fmt.Errorf("library %s: %w", name, err)
	}
	if err := extractDeb(ctx, debs[0], dir); err != nil {
		return "", "", err
	}
	ma := multiarch()
	file = findLib(name, []string{filepath.Join(dir, "lib", ma), filepath.Join(dir, "usr/lib", ma), filepath.Join(dir, "lib64"), filepath.Join(dir, "usr/lib64")})
	if file == "" {
		return "", "", fmt.Errorf("library %s: not in package %s (%s)", name, pkg, debs[0])
	}
	rel, _ := filepath.Rel(dir, file)
	return file, fmt.Sprintf("/%s in %s", rel, debs[0]), nil
}

func copyFile(from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, fi.Mode().Perm())
}

// Nginx assembles library/nginx:latest from a root made by PrepareNginxRoot,
// in four layers, each explained in the image's history:
//
//  1. base files: /etc/passwd and /etc/group with www-data (the user nginx's
//     workers switch to), /etc/nsswitch.conf, /tmp, /run;
//  2. the shared libraries (glibc and its loader, OpenSSL, PCRE2, zlib,
//     libcrypt): nginx is a dynamically linked C program;
//  3. the nginx package's files: /usr/sbin/nginx, /usr/share/nginx;
//  4. configuration and content: /etc/nginx, plus what the packages'
//     maintainer scripts would have made (the sites-enabled/default link,
//     /var/www/html/index.html, /var/lib/nginx, /var/log/nginx) with logs
//     sent to the container's stdout and stderr, as Docker's nginx does.
//
// It runs as `nginx -g 'daemon off;'` (Cmd) and listens on port 80. The
// master process starts as root and needs CAP_CHOWN, CAP_SETUID and
// CAP_SETGID (it chowns /var/lib/nginx/body, then its workers become
// www-data).
func Nginx(ctx context.Context, debRoot string) (v1.Image, error) {
	if _, err := os.Stat(filepath.Join(debRoot, "usr/sbin/nginx")); err != nil {
		return nil, fmt.Errorf("nginx recipe: no usr/sbin/nginx in %s (fill it with images.PrepareNginxRoot): %w", debRoot, err)
	}
	interp, _, err := elfDeps(filepath.Join(debRoot, "usr/sbin/nginx"))
	if err != nil {
		return nil, fmt.Errorf("nginx recipe: %w", err)
	}
	if _, err := os.Stat(filepath.Join(debRoot, interp)); interp != "" && err != nil {
		return nil, fmt.Errorf("nginx recipe: the loader %s is not in %s (its libraries are missing; fill it with images.PrepareNginxRoot)", interp, debRoot)
	}

	const (
		base = iota
		libs
		pkg
		conf
	)
	layers := []map[string]entry{{}, {}, {}, {}}
	err = filepath.WalkDir(debRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(debRoot, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, s := range skippedPaths() {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		e, err := fileToEntry(p, rel)
		if err != nil {
			return err
		}
		top, _, _ := strings.Cut(rel, "/")
		switch {
		case top == "lib" || top == "lib64":
			layers[libs][rel] = e
		case top == "etc" || top == "var":
			layers[conf][rel] = e
		default:
			layers[pkg][rel] = e
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nginx recipe: reading %s: %w", debRoot, err)
	}

	for _, e := range []entry{
		textEntry("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nwww-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
		textEntry("etc/group", "root:x:0:\nadm:x:4:\nwww-data:x:33:\nnogroup:x:65534:\n"),
		textEntry("etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"),
		dirEntry("tmp", 0o1777),
		dirEntry("run", 0o755),
	} {
		layers[base][e.name] = e
	}
	for _, e := range []entry{
		linkEntry("etc/nginx/sites-enabled/default", "../sites-available/default"),
		dirEntry("var/www/html", 0o755),
		textEntry("var/www/html/index.html", nginxIndexHTML),
		dirEntry("var/lib/nginx", 0o755),
		dirEntry("var/log/nginx", 0o755),
		linkEntry("var/log/nginx/access.log", "/dev/stdout"),
		linkEntry("var/log/nginx/error.log", "/dev/stderr"),
	} {
		layers[conf][e.name] = e
	}

	cfg := v1.Config{
		Cmd:          []string{"nginx", "-g", "daemon off;"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"80/tcp": {}},
		StopSignal:   "SIGQUIT",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "nginx",
			"org.opencontainers.image.description": "nginx from Debian's nginx and nginx-common packages, built by podlab (make images)",
		},
	}
	list := func(m map[string]entry) []entry {
		out := make([]entry, 0, len(m))
		for _, e := range m {
			out = append(out, e)
		}
		return out
	}
	return assemble(cfg, []layerStep{
		{
			createdBy: "ADD base.tar / # /etc/passwd, /etc/group, /etc/nsswitch.conf, /tmp, /run",
			comment:   "base files: the users root and www-data (uid 33, nginx's workers run as it), how to look users up, /tmp and /run (nginx writes /run/nginx.pid)",
			entries:   list(layers[base]),
		},
		{
			createdBy: "COPY libs /lib/" + multiarch() + "/ # the libraries ldd /usr/sbin/nginx lists",
			comment:   "shared libraries: nginx is dynamically linked; the kernel starts the loader " + interp + ", which maps libc, libssl, libcrypto, libpcre2-8, libz and libcrypt",
			entries:   list(layers[libs]),
		},
		{
			createdBy: "RUN apt-get download nginx nginx-common && dpkg-deb -x # the program",
			comment:   "the nginx package: /usr/sbin/nginx and /usr/share/nginx (init scripts, systemd units and docs left out: a container has no init system)",
			entries:   list(layers[pkg]),
		},
		{
			createdBy: "COPY conf / # /etc/nginx, sites-enabled/default, /var/www/html/index.html, logs -> /dev/stdout and /dev/stderr",
			comment:   "configuration and content: /etc/nginx, and what the packages' maintainer scripts would have made: the default site enabled, /var/www/html/index.html, /var/lib/nginx, logs to the container's stdout and stderr",
			entries:   list(layers[conf]),
		},
	})
}

// fileToEntry reads the file at p into a layer entry named rel.
func fileToEntry(p, rel string) (entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return entry{}, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return entry{}, err
		}
		return linkEntry(rel, target), nil
	case fi.IsDir():
		return dirEntry(rel, modeBits(fi.Mode())), nil
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			return entry{}, err
		}
		return fileEntry(rel, modeBits(fi.Mode()), b), nil
	default:
		return entry{}, fmt.Errorf("%s: unsupported file type %s", rel, fi.Mode().Type())
	}
}

const nginxIndexHTML = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx, run by podlab</title></head>
<body>
<h1>Welcome to nginx, run by podlab!</h1>
<p>This page is /var/www/html/index.html inside the image library/nginx:latest.
podlab built that image from Debian's nginx packages (make images), served it
from its local registry, pulled it into its content store, unpacked its layers
into a bundle, wrote the bundle's config.json and started it with runc:
the steps a kubelet and its container runtime take for every Pod.</p>
</body>
</html>
`
