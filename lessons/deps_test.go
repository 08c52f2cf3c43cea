package lessons_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/lesson"
)

// debianPath is root's PATH on a fresh Debian 12, and Go's: where a
// command a lesson or a test runs must be found, whatever this machine
// has besides (a pyenv's python3, a cloud SDK's kubectl).
const debianPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin"

// givenTools are what a fresh machine has besides Debian 12's required
// packages (the machine: Go, git, make, gcc); builtTools what
// `make deps` and `make build` put into bin/.
var (
	givenTools = []string{"go", "git", "make", "gcc"}
	builtTools = []string{"podlab", "podlab-runc", "runc", "crane", "kubectl", "etcd", "etcdctl", "crictl"}
)

// TestDepsInstallWhatLessonsRun: every command a lesson's sh block runs,
// and every binary a test looks up by name, comes from a Debian package of
// priority required (a minimal Debian 12 has it), from one the Makefile's
// DEMO_APT_PACKAGES or TEST_APT_PACKAGES list (`make deps` installs both), or is built into bin/, or is
// Go, git, make or gcc. A command this machine has by hand would otherwise
// fail on a fresh one (jq in lesson 18: "jq: command not found").
func TestDepsInstallWhatLessonsRun(t *testing.T) {
	dpkg := testenv.LookPath(t, "dpkg-query") // Debian only
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	apt := aptPackages(string(b))
	if len(apt) == 0 {
		t.Fatal("no DEMO_APT_PACKAGES and TEST_APT_PACKAGES in the Makefile")
	}
	// what the two lists install: them and what they depend on
	installs := slices.Clone(apt)
	for _, p := range apt {
		deps, err := exec.Command(dpkg, "-W", "-f", "${Depends},${Pre-Depends}", p).Output()
		if err != nil {
			continue // not installed here: the loop below says what is missing
		}
		for _, d := range strings.Split(string(deps), ",") {
			if f := strings.Fields(strings.Split(d, "|")[0]); len(f) > 0 {
				installs = append(installs, strings.Split(f[0], ":")[0])
			}
		}
	}
	owners := debianPackages(t)
	all, err := lesson.List(".")
	if err != nil {
		t.Fatal(err)
	}
	where := map[string][]string{}
	for _, l := range all {
		for _, blk := range l.Runs() {
			for _, c := range shellCommands(blk.Code) {
				where[c] = append(where[c], l.File)
			}
		}
	}
	for _, c := range testedBinaries(t) {
		where[c] = append(where[c], "a test")
	}
	names := make([]string, 0, len(where))
	for c := range where {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if slices.Contains(givenTools, c) || slices.Contains(builtTools, c) || slices.Contains(shellBuiltins, c) {
			continue
		}
		path := lookDebianPath(c)
		if path == "" {
			continue // a shell function, a word of a here-document: no command
		}
		pkg := debianPackage(owners, path)
		if pkg == "" {
			t.Errorf("%s (run by %s) is %s, which no Debian package installed: install it from a package TEST_APT_PACKAGES lists, or build it into bin/ in make deps", c, strings.Join(slices.Compact(where[c]), ", "), path)
			continue
		}
		prio, err := exec.Command(dpkg, "-W", "-f", "${Priority}", pkg).Output()
		if err != nil {
			t.Errorf("dpkg-query %s: %v", pkg, err)
			continue
		}
		if string(prio) != "required" && !slices.Contains(installs, pkg) {
			t.Errorf("%s (run by %s) comes from the Debian package %s (priority %s), which a minimal Debian 12 lacks and neither the Makefile's DEMO_APT_PACKAGES and TEST_APT_PACKAGES nor what they depend on has: add %s to TEST_APT_PACKAGES", c, strings.Join(slices.Compact(where[c]), ", "), pkg, prio, pkg)
		}
	}
}

// aptPackages reads the DEMO_APT_PACKAGES := and TEST_APT_PACKAGES := ...
// assignments of a Makefile (make deps installs both), with their
// continuation lines.
func aptPackages(makefile string) []string {
	var words []string
	for _, name := range []string{"DEMO_APT_PACKAGES", "TEST_APT_PACKAGES"} {
		_, rest, ok := strings.Cut(makefile, "\n"+name+" :=")
		if !ok {
			return nil
		}
		for _, line := range strings.Split(rest, "\n") {
			cont := strings.HasSuffix(strings.TrimSpace(line), "\\")
			words = append(words, strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "\\"))...)
			if !cont {
				break
			}
		}
	}
	return words
}

// shellBuiltins are bash's builtins and keywords: no package has them.
var shellBuiltins = strings.Fields(`alias bg break builtin cd command continue declare echo eval exec exit
	export false fg getopts hash jobs kill let local printf pwd read readonly return set shift source
	test times trap true type ulimit umask unalias unset wait if then else elif fi for while until do
	done case esac in function time . [ [[ ! { } coproc select`)

var (
	heredocRE = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_]+)['"]?`)
	singleRE  = regexp.MustCompile(`'[^']*'`)
	splitRE   = regexp.MustCompile("\\|\\||&&|[;|&()`{}\n]|\\$\\(")
	assignRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	commandRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._+-]*$`)
)

// shellCommands lists the command names a block of shell code runs: the
// first word of each simple command, after the keywords, `!` and variable
// assignments before it; here-documents and single-quoted strings (awk and
// Python programs) are left out.
func shellCommands(code string) []string {
	var kept []string
	end := ""
	for _, line := range strings.Split(strings.ReplaceAll(code, "\\\n", " "), "\n") {
		if end != "" {
			if strings.TrimSpace(line) == end {
				end = ""
			}
			continue
		}
		if m := heredocRE.FindStringSubmatch(line); m != nil {
			end = m[1]
		}
		kept = append(kept, line)
	}
	text := singleRE.ReplaceAllString(strings.Join(kept, "\n"), "''")
	var out []string
	for _, seg := range splitRE.Split(text, -1) {
		fields := strings.Fields(seg)
		for len(fields) > 0 && (assignRE.MatchString(fields[0]) || slices.Contains([]string{"!", "then", "do", "else", "elif", "if", "while", "until", "time"}, fields[0])) {
			fields = fields[1:]
		}
		if len(fields) == 0 || slices.Contains([]string{"for", "case", "in", "done", "fi", "esac"}, fields[0]) {
			continue
		}
		if c := fields[0]; commandRE.MatchString(c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// testedBinaries lists the binaries the repository's tests look up by a
// literal name: testenv.LookPath(t, "NAME") and exec.Command("NAME", ...).
func testedBinaries(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`(?:LookPath\((?:t|b|tb), |exec\.Command(?:Context)?\((?:ctx, )?)"([a-z][a-z0-9._-]*)"`)
	var out []string
	err := filepath.WalkDir(testenv.RepoRoot(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			if c := string(m[1]); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lookDebianPath finds name on debianPath, or "".
func lookDebianPath(name string) string {
	for _, dir := range filepath.SplitList(debianPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// debianPackages maps each path Debian's packages installed to its
// package, from dpkg's file lists (what dpkg -S reads, once).
func debianPackages(t *testing.T) map[string]string {
	t.Helper()
	lists, err := filepath.Glob("/var/lib/dpkg/info/*.list")
	if err != nil || len(lists) == 0 {
		testenv.Missing(t, "no dpkg file lists in /var/lib/dpkg/info: not a Debian machine")
	}
	out := map[string]string{}
	for _, l := range lists {
		pkg, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(l), ".list"), ":") // jq, libc6:amd64
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range strings.Split(string(b), "\n") {
			if p != "" {
				out[p] = pkg
			}
		}
	}
	return out
}

// debianPackage is the package that installed path: as given, with its
// links resolved, or without (with) the /usr a merged /usr adds; "" if none.
func debianPackage(owners map[string]string, path string) string {
	cands := []string{path}
	if r, err := filepath.EvalSymlinks(path); err == nil {
		cands = append(cands, r)
	}
	for _, c := range slices.Clone(cands) {
		if rest, ok := strings.CutPrefix(c, "/usr"); ok {
			cands = append(cands, rest)
		} else {
			cands = append(cands, "/usr"+c)
		}
	}
	for _, c := range cands {
		if pkg := owners[c]; pkg != "" {
			return pkg
		}
	}
	return ""
}

func TestShellCommands(t *testing.T) {
	tests := []struct {
		name string
		code string
		want []string
	}{
		{"pipes, lists and substitutions", "A=$(podlab get pod web | awk '{print $1}') && jq -r . f || true\n", []string{"podlab", "awk", "jq", "true"}},
		{"keywords and negation", "for i in $(seq 3); do ! grep -q x f; done\nif [ -n \"$X\" ]; then echo y; fi\n", []string{"seq", "grep", "echo"}},
		{"here-documents are data", "cat > f.yaml <<EOF\napiVersion: v1\nkind: Pod\nEOF\nkubectl apply -f f.yaml\n", []string{"cat", "kubectl"}},
		{"quoted programs are data", "python3 -c 'import json; print(1)'\n", []string{"python3"}},
		{"continued lines", "curl -s \\\n  http://x | head -1\n", []string{"curl", "head"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellCommands(tt.code); !slices.Equal(got, tt.want) {
				t.Errorf("shellCommands = %q, want %q", got, tt.want)
			}
		})
	}
}
