package lessons_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/lessons"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/lesson"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// blockTimeout bounds each sh block: a kubelet's --once pass pulls and
// starts containers, the slowest thing a lesson does.
const blockTimeout = 90 * time.Second

// TestLessons runs every lesson as a learner would: every sh block of a
// lesson, in one bash session, as root, on a fresh state directory, with a
// freshly built podlab first on PATH and the demo registry already serving
// at $REGISTRY. Each block's output must hold the lines of its expected
// block, in order. At the end, leftover background jobs are killed and
// `podlab reset --yes` removes the containers and mounts. It runs
//
//   - in-order: every lesson, in number order, on one state directory,
//     with `podlab check N` before each lesson N (it must fail there);
//   - alone/NN: lesson 01, then `podlab check NN` (it must fail on that
//     fresh state, every check of it), then the lessons NN says it needs
//     in its first lines (lesson.Needs, and theirs, in number order), then
//     NN: a learner who comes back to one lesson finds it works, or is
//     told by its first block what to do first.
//
// PODLAB_LESSONS=05,14 narrows both to those lessons (the in-order run then
// runs 01, them and the lessons they need, in order); `-run
// 'TestLessons/alone/05'` picks runs.
// The runs go in parallel (go test's -parallel, GOMAXPROCS by default).
func TestLessons(t *testing.T) {
	testenv.RequireRoot(t)
	runcBin := testenv.Runc(t)
	bash := testenv.LookPath(t, "bash")
	all, err := lesson.List(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].Number != 1 {
		t.Fatal("no lessons/01-*.md")
	}
	picked, err := pickLessons(all, os.Getenv("PODLAB_LESSONS"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tmp := t.TempDir()
	// t.TempDir's parent is 0700: open it as /var/lib is, for the pod of
	// lesson 09 whose root (in its user namespace) must reach its rootfs.
	if err := os.Chmod(filepath.Dir(tmp), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	podlab := buildPodlab(t, bin, runcBin)
	ctx := context.Background()
	layout := demoImages(t, ctx, tmp, needsNginx(all), needsPause(all), builtImages())
	t.Logf("podlab %s, demo images %s (setup took %s)", podlab, layout, time.Since(start).Round(time.Millisecond))
	r := lessonRunner{bash: bash, podlab: podlab, runc: runcBin, bin: bin, layout: layout}

	t.Run("in-order", func(t *testing.T) {
		t.Parallel()
		lessons := []*lesson.Lesson{all[0]}
		for _, l := range all[1:] {
			if slices.ContainsFunc(picked, func(p *lesson.Lesson) bool { return p == l || needs(all, p, l) }) {
				lessons = append(lessons, l)
			}
		}
		r.run(t, lessons, func(next *lesson.Lesson) (*lesson.Lesson, string) { return next, checkBefore(next) }, passBefore)
	})
	for _, l := range picked {
		t.Run(fmt.Sprintf("alone/%02d", l.Number), func(t *testing.T) {
			t.Parallel()
			deps, err := needsOf(all, l)
			if err != nil {
				t.Fatal(err)
			}
			lessons := append(append([]*lesson.Lesson{all[0]}, deps...), l)
			if len(deps) > 0 {
				t.Logf("%s needs %s", l.File, names(deps))
			}
			// `podlab check NN` right after lesson 01, on a fresh state:
			// every check of it must fail, but those passFresh lists.
			probe := func(next *lesson.Lesson) (*lesson.Lesson, string) {
				if next == lessons[1] {
					return l, checkBefore(l)
				}
				return nil, ""
			}
			r.run(t, lessons, probe, passFresh)
		})
	}
}

// pickLessons is the lessons (but 01) PODLAB_LESSONS names ("05,14"), all of
// them (but 01) when it is empty.
func pickLessons(all []*lesson.Lesson, list string) ([]*lesson.Lesson, error) {
	if strings.TrimSpace(list) == "" {
		return all[1:], nil
	}
	var out []*lesson.Lesson
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("PODLAB_LESSONS=%q: %q is not a lesson number: list them as 05,14", list, f)
		}
		l, err := lesson.Find(all, n)
		if err != nil {
			return nil, fmt.Errorf("PODLAB_LESSONS=%q: %w", list, err)
		}
		if n != 1 && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b *lesson.Lesson) int { return a.Number - b.Number })
	return out, nil
}

// needsOf is what lesson l needs (lesson.Needs), and what those need, in
// number order, without lesson 01 (every run starts with it). A need must
// come before l.
func needsOf(all []*lesson.Lesson, l *lesson.Lesson) ([]*lesson.Lesson, error) {
	seen := map[int]bool{}
	var walk func(l *lesson.Lesson) error
	walk = func(l *lesson.Lesson) error {
		for _, n := range l.Needs() {
			if n >= l.Number {
				return fmt.Errorf("%s needs lesson %02d, which comes after it", l.File, n)
			}
			if seen[n] || n == 1 {
				continue
			}
			seen[n] = true
			nl, err := lesson.Find(all, n)
			if err != nil {
				return fmt.Errorf("%s needs lesson %02d: %w", l.File, n, err)
			}
			if err := walk(nl); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(l); err != nil {
		return nil, err
	}
	var out []*lesson.Lesson
	for _, x := range all {
		if seen[x.Number] {
			out = append(out, x)
		}
	}
	return out, nil
}

// needs reports whether lesson l needs lesson m (needsOf).
func needs(all []*lesson.Lesson, l, m *lesson.Lesson) bool {
	ls, err := needsOf(all, l)
	return err == nil && slices.Contains(ls, m)
}

func names(ls []*lesson.Lesson) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.File)
	}
	return strings.Join(s, ", ")
}

// lessonRunner runs sessions of lessons, each on a state directory of its
// own with a registry of its own.
type lessonRunner struct {
	bash, podlab, runc, bin, layout string
}

// run runs lessons in one session on a fresh state directory; probe says
// what to run before each lesson (see session.Probe), passBefore which
// checks of a probe may pass. It reports every block's problem, and the
// probes', in subtests named after the lessons.
func (r lessonRunner) run(t *testing.T, lessons []*lesson.Lesson, probe func(*lesson.Lesson) (*lesson.Lesson, string), passBefore map[int][]string) {
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-20*time.Second))
		defer cancel()
	}
	tmp := t.TempDir()
	// 0711 as above: the state lives under it.
	if err := os.Chmod(filepath.Dir(tmp), 0o711); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(tmp, "state")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{state, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		cleanUp(t, r.podlab, r.runc, state)
		// A lesson with a cluster of its own (15) keeps its state
		// directory in the working directory, and resets it at its end;
		// if it stopped before, reset it here.
		own, _ := filepath.Glob(filepath.Join(work, "*"))
		for _, d := range own {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() && madeByPodlab(d) {
				cleanUp(t, r.podlab, r.runc, d)
			}
		}
	})
	registry := startRegistry(t, r.podlab, state, r.layout, filepath.Join(tmp, "registry.log"))
	s := session{
		Bash: r.bash,
		Dir:  work,
		Env: lessonEnv(os.Environ(),
			"PATH="+r.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"PODLAB_STATE_DIR="+state,
			"REGISTRY="+registry,
			// the OCI layout the registry serves, for a lesson that
			// serves it again on its own lab network (16)
			"DEMO_IMAGES="+r.layout,
			"PODLAB_REGISTRY_MIRROR=http://"+registry,
			// the kubeconfigs' port and podlab apiserver's: a free one,
			// so that lessons on one machine never share 6443
			"PODLAB_APISERVER_PORT="+strconv.Itoa(freePort(t)),
		),
		Timeout: blockTimeout,
		Grace:   5 * time.Second,
		Probe:   probe,
	}
	runStart := time.Now()
	runs, err := s.run(ctx, lessons)
	if err != nil {
		t.Fatalf("running the lessons: %v", err)
	}
	t.Logf("%d sh blocks of %s ran in %s (state %s, registry %s)", len(runs), names(lessons), time.Since(runStart).Round(time.Millisecond), state, registry)

	for _, l := range lessons {
		t.Run(l.Name(), func(t *testing.T) {
			var took time.Duration
			skipped, blocks := 0, 0
			for _, r := range runs {
				if r.Lesson != l {
					continue
				}
				if r.Probe {
					if p := checkedBefore(l, r, passBefore); p != "" {
						t.Error(p)
					}
					continue
				}
				blocks++
				took += r.Took
				if !r.Started {
					skipped++
					continue
				}
				if p := r.problems(blockTimeout); p != "" {
					t.Error(p + translatedAt(l, r.Block))
				}
			}
			if skipped > 0 {
				t.Errorf("%d sh block(s) of %s never ran: an earlier block stopped the session", skipped, l.File)
			}
			t.Logf("%s: %d sh blocks in %s", l.File, blocks, took.Round(time.Millisecond))
		})
	}
	if t.Failed() {
		if b, err := os.ReadFile(filepath.Join(tmp, "registry.log")); err == nil {
			t.Logf("the registry's log:\n%s", b)
		}
	}
}

// checkBefore is the session's probe: before lesson N (N >= 2: lesson 01
// only looks at the machine) it runs `podlab check N`, on the state the
// lessons before N left.
func checkBefore(l *lesson.Lesson) string {
	if l.Number < 2 || !lesson.HasChecks(l.Number) {
		return ""
	}
	return fmt.Sprintf("podlab check %02d", l.Number)
}

// passBefore lists the checks that may pass before their lesson, and why:
// each holds from an earlier lesson, and the lesson's own work is proven by
// the other checks of the lesson.
var passBefore = map[int][]string{
	// Lesson 02 stored web; lesson 03 reads it back, which leaves nothing.
	3: {"pod web reads back through the gate"},
	// Lesson 04's `podlab kubelet --node node-1 --once` registers node-1.
	5: {"node " + apiserver.HostNode + " is registered"},
	// Lesson 05 started hello and web, whose logs lesson 10 reads.
	10: {"a container's log has output"},
	// Lesson 04's kubelet made node-1 Ready, and lesson 11 left every pod
	// Running; lesson 12 keeps them so with the components as daemons.
	12: {"a node is Ready", "the pods are Running"},
}

// passFresh lists the checks that may pass on a fresh state, right after
// lesson 01, and why: lesson 13's look for what is absent, and a fresh state
// has nothing; its third, that reset emptied the state directory, fails there
// (lesson 01 left the registry's blobs in it).
var passFresh = map[int][]string{
	13: {"no container is left in runc", "nothing is mounted under the state directory"},
}

// hintCommand finds a command in a FAIL line's hint: `podlab ...`.
var hintCommand = regexp.MustCompile("`[^`]+`")

// checkedBefore says what is wrong with the probe r of lesson l: `podlab
// check N` run before lesson N must fail, each check but those pass lists
// for N must fail, and each FAIL must say what to do (a command); "" if
// nothing is wrong.
func checkedBefore(l *lesson.Lesson, r *blockRun, pass map[int][]string) string {
	cmd := r.Block.Commands()
	switch {
	case !r.Started:
		return fmt.Sprintf("`%s` never ran before %s: an earlier block stopped the session", cmd, l.File)
	case r.TimedOut:
		return fmt.Sprintf("`%s` did not finish before %s; its output so far:\n%s", cmd, l.File, indent(r.Output))
	case !r.Finished:
		return fmt.Sprintf("`%s` stopped the session before %s; its output:\n%s", cmd, l.File, indent(r.Output))
	}
	var problems []string
	if r.ExitCode == 0 {
		problems = append(problems, fmt.Sprintf("`%s` passed before %s was done: its checks must see the lesson's work, not only what earlier lessons left", cmd, l.File))
	}
	checks := 0
	for _, line := range strings.Split(r.Output, "\n") {
		if name, ok := strings.CutPrefix(line, "PASS "); ok {
			checks++
			if !slices.Contains(pass[l.Number], name) {
				problems = append(problems, fmt.Sprintf("%q passed before %s was done: it must see what the lesson does (objects, events, the store's history, files), or be listed in passBefore with the reason", name, l.File))
			}
		}
		if rest, ok := strings.CutPrefix(line, "FAIL "); ok {
			checks++
			if !hintCommand.MatchString(rest) {
				problems = append(problems, fmt.Sprintf("FAIL %s: the hint names no command in `backquotes` that makes what is missing", rest))
			}
		}
	}
	if checks == 0 {
		problems = append(problems, "it printed no PASS or FAIL line")
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, run before the lesson:\n    %s\nits output:\n%s", l.File, strings.Join(problems, "\n    "), indent(r.Output))
}

// TestLessonFiles checks the lessons' shape without running them: each
// file is named as a lesson and parses, has the sections of a lab in order,
// runs something, links only to lessons that exist, and is in the README's
// index.
func TestLessonFiles(t *testing.T) {
	all, err := lesson.List(".")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Every Markdown file but the README is a lesson: a name List does not
	// take (03-Pull.md, 3-pull.md) would be skipped silently.
	files, _ := filepath.Glob("*.md")
	for _, f := range files {
		if f != "README.md" && !slices.ContainsFunc(all, func(l *lesson.Lesson) bool { return l.File == f }) {
			t.Errorf("%s is not read as a lesson: name it NN-name.md (two digits, lower case)", f)
		}
	}
	// `podlab lesson` shows the copy built into podlab.
	if _, err := lesson.ListFS(lessons.Files); err != nil {
		t.Errorf("the embedded lessons: %v", err)
	}
	link := regexp.MustCompile(`\]\((\d\d-[a-z0-9-]+\.md)\)`)
	for _, l := range all {
		t.Run(l.Name(), func(t *testing.T) {
			var headings []string
			for _, s := range l.Sections {
				headings = append(headings, s.Heading)
			}
			at := -1
			for _, want := range []string{"Why it matters", "Commands", "Verification", "Next"} {
				i := slices.Index(headings, want)
				if i < 0 {
					t.Errorf("no section %q (sections: %q)", want, headings)
				} else if i < at {
					t.Errorf("section %q comes before the one it should follow (sections: %q)", want, headings)
				}
				at = max(at, i)
			}
			if len(l.Runs()) == 0 {
				t.Error("no sh block: a lesson makes the learner run something")
			}
			b, err := os.ReadFile(l.File)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range link.FindAllStringSubmatch(string(b), -1) {
				if _, err := os.Stat(m[1]); err != nil {
					t.Errorf("links to %s, which does not exist", m[1])
				}
			}
			if !bytes.Contains(readme, []byte("("+l.File+")")) {
				t.Errorf("README.md's index does not link to %s", l.File)
			}
			if p := checkedAfter(l); p != "" {
				t.Error(p)
			}
		})
	}
}

// checkedAfter says what is wrong with how lesson l checks its own work
// ("" if nothing): a lesson with checks runs `podlab check NN` in an sh
// block whose expected block has a PASS line for each of its checks, in
// order, so that TestLessons proves every check passes right after it.
func checkedAfter(l *lesson.Lesson) string {
	names := lesson.CheckNames(l.Number)
	if names == nil {
		return ""
	}
	cmd := fmt.Sprintf("podlab check %02d", l.Number)
	for _, b := range l.Runs() {
		if !slices.Contains(strings.Split(b.Commands(), "\n"), cmd) {
			continue
		}
		var want []string
		for _, n := range names {
			want = append(want, "PASS "+n)
		}
		if b.Expected == nil {
			return fmt.Sprintf("the sh block at line %d runs `%s` with no expected block: list %q", b.Line, cmd, want)
		}
		if i := lesson.FirstMissing(want, b.Expected.Code); i >= 0 {
			return fmt.Sprintf("the expected block at line %d does not list %q, after the lines before it: list every check, in order: %q", b.Expected.Line, want[i], want)
		}
		return ""
	}
	return fmt.Sprintf("no sh block runs `%s` (on its own line): the lesson must end with its checks", cmd)
}

// lessonEnv is env without what would change podlab's behaviour behind a
// lesson's back (another user, a token, debug output, another runtime),
// plus set.
func lessonEnv(env []string, set ...string) []string {
	drop := []string{"PODLAB_AS", "PODLAB_TOKEN", "PODLAB_DEBUG", "PODLAB_RUNTIME", "PODLAB_STATE_DIR",
		"PODLAB_REGISTRY_MIRROR", "REGISTRY", "DEMO_IMAGES", "PODLAB_APISERVER_PORT", "KUBECONFIG"}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) && !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// buildPodlab builds bin/podlab as `make build` does, into dir, with runc
// next to it as `make deps` puts it: podlab finds it there.
func buildPodlab(t *testing.T, dir, runcBin string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go is not on PATH: the lessons' test builds podlab")
	}
	out := filepath.Join(dir, "podlab")
	// and podlab-runc beside it, the shim podlab starts for each container
	for _, pkg := range []string{"./cmd/podlab", "./cmd/podlab-runc"} {
		cmd := exec.Command(goBin, "build", "-tags", "urfave_cli_no_docs", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	if err := os.Symlink(runcBin, filepath.Join(dir, "runc")); err != nil {
		t.Fatal(err)
	}
	// kubectl v1.37 as make deps builds it, ahead of any other on PATH
	if err := os.Symlink(testenv.Kubectl(t), filepath.Join(dir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	// crictl 1.37, the CRI's client (lessons 17 and 18), as make deps builds it into bin/
	if err := os.Symlink(testenv.LookPath(t, "crictl"), filepath.Join(dir, "crictl")); err != nil {
		t.Fatal(err)
	}
	return out
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// needsNginx reports whether a lesson runs anything with nginx.
func needsNginx(all []*lesson.Lesson) bool {
	for _, l := range all {
		for _, b := range l.Runs() {
			if strings.Contains(b.Code, "nginx") {
				return true
			}
		}
	}
	return false
}

// needsPause reports whether a lesson runs a CRI runtime of its own (the
// lab containerd), whose every pod starts with the sandbox image.
func needsPause(all []*lesson.Lesson) bool {
	for _, l := range all {
		for _, b := range l.Runs() {
			if strings.Contains(b.Code, "podlab containerd") {
				return true
			}
		}
	}
	return false
}

// builtImages are where `make images` puts the demo images:
// <state>/demo-images of the Makefile's state directory (PODLAB_DEB_CACHE
// is its <state>/cache/debs), or of the default one.
func builtImages() []string {
	var out []string
	if c := os.Getenv("PODLAB_DEB_CACHE"); c != "" {
		out = append(out, filepath.Join(filepath.Dir(filepath.Dir(c)), "demo-images"))
	}
	return append(out, "/var/lib/podlab/demo-images")
}

// demoImages returns an OCI layout with the demo images: the first of
// candidates that has them, else one built here into tmp. nginx needs Debian's .debs
// ($PODLAB_DEB_CACHE, else images/out/debs); without them only hello is
// built, and a lesson that needs nginx skips the test (fails it in CI).
func demoImages(t *testing.T, ctx context.Context, tmp string, nginx, pause bool, candidates []string) string {
	t.Helper()
	for _, c := range candidates {
		refs := layoutRefs(c)
		if slices.Contains(refs, images.HelloRef) && (!nginx || slices.Contains(refs, images.NginxRef)) &&
			(!pause || slices.Contains(refs, images.PauseRef)) {
			return c
		}
	}

	out := filepath.Join(tmp, "demo-images")
	cache := os.Getenv("PODLAB_DEB_CACHE")
	if cache == "" {
		cache = filepath.Join(testenv.RepoRoot(), "images", "out", "debs")
	}
	haveDebs := true
	for _, p := range []string{"nginx", "nginx-common"} {
		if m, _ := filepath.Glob(filepath.Join(cache, p+"_*.deb")); len(m) == 0 {
			haveDebs = false
		}
	}
	if haveDebs {
		if _, err := images.BuildAll(ctx, out, images.BuildOptions{ModuleDir: testenv.RepoRoot(), CacheDir: cache, WorkDir: filepath.Join(tmp, "images-work")}); err != nil {
			t.Fatalf("building the demo images: %v", err)
		}
		return out
	}
	if nginx {
		testenv.Missing(t, "the lessons run nginx, and there are no demo images (`make images`) nor nginx .debs in %s to build it from (set PODLAB_DEB_CACHE)", cache)
	}
	helloBin := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		t.Fatalf("building the hello program: %v", err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		t.Fatal(err)
	}
	named := []images.Named{{Ref: images.HelloRef, Image: img}}
	if pause {
		pauseBin := filepath.Join(tmp, "pause")
		if err := images.BuildPause(ctx, pauseBin); err != nil {
			t.Fatalf("building the pause program: %v", err)
		}
		p, err := images.Pause(ctx, images.PauseOptions{Binary: pauseBin})
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, images.Named{Ref: images.PauseRef, Image: p})
	}
	if err := images.WriteLayout(ctx, out, named); err != nil {
		t.Fatal(err)
	}
	return out
}

// layoutRefs lists the ref.name annotations of an OCI layout's index.json.
func layoutRefs(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil
	}
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if json.Unmarshal(b, &idx) != nil {
		return nil
	}
	var refs []string
	for _, m := range idx.Manifests {
		if r := m.Annotations[images.RefNameAnnotation]; r != "" {
			refs = append(refs, r)
		}
	}
	return refs
}

// startRegistry runs `podlab registry serve` on a port the kernel picks and
// returns its host:port once it serves podlab/hello. It is stopped when the
// test ends.
func startRegistry(t *testing.T, podlab, state, layout, logPath string) string {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(podlab, "--state-dir", state, "registry", "serve", "--addr", "127.0.0.1:0", "--images", layout)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	listening := regexp.MustCompile(`listening on http://(\S+)`)
	deadline := time.Now().Add(60 * time.Second)
	for addr := ""; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("podlab registry serve exited:\n%s", b)
		default:
		}
		if addr == "" {
			b, _ := os.ReadFile(logPath)
			if m := listening.FindSubmatch(b); m != nil {
				addr = string(m[1])
			}
			continue
		}
		resp, err := http.Get("http://" + addr + "/v2/_catalog")
		if err != nil {
			continue
		}
		var body struct{ Repositories []string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err == nil && slices.Contains(body.Repositories, "podlab/hello") {
			return addr
		}
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("the registry did not serve podlab/hello within a minute:\n%s", b)
	return ""
}

// cleanUp removes what the lessons left running: `podlab reset --yes` when
// podlab has that command (and the lessons left something to reset), then
// (whatever reset missed) every container of
// every runc root of the state directory, the mounts under it (pod
// namespaces pinned by bind mounts) and the pods' empty cgroups.
func cleanUp(t *testing.T, podlab, runcBin, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if exec.Command(podlab, "reset", "--help").Run() == nil && madeByPodlab(state) {
		cmd := exec.CommandContext(ctx, podlab, "--state-dir", state, "reset", "--yes")
		cmd.Env = lessonEnv(os.Environ(), "PATH="+filepath.Dir(podlab)+string(os.PathListSeparator)+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("podlab reset --yes: %v\n%s", err, b)
		} else {
			t.Logf("podlab reset --yes: %d lines of output", strings.Count(string(b), "\n"))
		}
	}
	type root struct{ dir, runc string }
	roots := []root{{state, filepath.Join(state, "runc")}}
	nodes, _ := filepath.Glob(filepath.Join(state, "nodes", "*"))
	for _, n := range nodes {
		roots = append(roots, root{n, statedir.Runtime{Dir: n}.RuncRoot()})
	}
	for _, r := range roots {
		rt := &runc.Runtime{Binary: runcBin, Root: r.runc, StateDir: r.dir}
		ids := map[string]bool{}
		for _, d := range []string{r.runc, filepath.Join(r.dir, "containers")} {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if e.IsDir() {
					ids[e.Name()] = true
				}
			}
		}
		for id := range ids {
			if _, err := rt.Delete(ctx, id, true); err != nil && !errors.Is(err, runc.ErrContainerNotFound) {
				t.Errorf("cleaning up container %s of %s: %v", id, r.dir, err)
			}
		}
	}
	unmountUnder(t, state)
	// The state directory's cgroups: its root /podlab-<hash> and all under it.
	if mounts, err := runc.HostCgroupMounts(); err == nil {
		root := statedir.Layout{Dir: state}.CgroupRoot()
		for _, m := range mounts {
			var dirs []string
			filepath.WalkDir(filepath.Join(m.Mountpoint, root), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				_ = unix.Rmdir(dirs[i])
			}
		}
	}
}

// madeByPodlab reports whether state holds what `podlab reset` removes
// (it refuses a directory with none of them: lesson 13 may have reset it).
func madeByPodlab(state string) bool {
	for _, d := range []string{"etcd", "nodes", "content"} {
		if _, err := os.Stat(filepath.Join(state, d)); err == nil {
			return true
		}
	}
	return false
}

// unmountUnder unmounts every mount point under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.EINVAL) {
			t.Errorf("unmounting %s: %v", points[i], err)
		}
	}
}

func TestPickLessons(t *testing.T) {
	const fence = "```"
	all := parseLessons(t,
		"# 01 — A\n\n"+fence+"sh\necho a\n"+fence+"\n",
		"# 02 — B\n\n"+fence+"sh\necho b\n"+fence+"\n",
		"# 03 — C\n\n"+fence+"sh\npodlab check 02\n"+fence+"\n\n## Why it matters\n",
		"# 04 — D\n\n"+fence+"sh\npodlab check 03\n"+fence+"\n\n## Why it matters\n",
	)
	numbers := func(ls []*lesson.Lesson) []int {
		var out []int
		for _, l := range ls {
			out = append(out, l.Number)
		}
		return out
	}
	tests := []struct {
		name  string
		list  string
		picks []int
	}{
		{"none: all but 01", "", []int{2, 3, 4}},
		{"a list, sorted, 01 and repeats dropped", "04, 01,2,04", []int{2, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickLessons(all, tt.list)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(numbers(got), tt.picks) {
				t.Errorf("picked %v, want %v", numbers(got), tt.picks)
			}
		})
	}
	for _, bad := range []string{"5x", "05,99", ",,"} {
		if _, err := pickLessons(all, bad); err == nil || !strings.Contains(err.Error(), "PODLAB_LESSONS") {
			t.Errorf("PODLAB_LESSONS=%q: error %v, want one naming PODLAB_LESSONS", bad, err)
		}
	}
	deps, err := needsOf(all, all[3])
	if err != nil || !slices.Equal(numbers(deps), []int{2, 3}) {
		t.Errorf("lesson 04 needs %v (%v), want [2 3]: 03 and what 03 needs", numbers(deps), err)
	}
	if deps, err := needsOf(all, all[1]); err != nil || len(deps) != 0 {
		t.Errorf("lesson 02 needs %v (%v), want nothing", numbers(deps), err)
	}
	later := parseLessons(t, "# 01 — A\n", "# 02 — B\n\n"+fence+"sh\npodlab check 03\n"+fence+"\n", "# 03 — C\n")
	if _, err := needsOf(later, later[1]); err == nil {
		t.Error("a lesson that needs a later one: no error")
	}
}
