package lesson_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/podlab/podlab/steps/lesson"

	"github.com/podlab/podlab/internal/testenv"
)

func TestFirstMissing(t *testing.T) {
	output := strings.Join([]string{
		"ok    root             running as root",
		"  store (etcd's role):  /tmp/x/etcd/store.db (revision 1)",
		"pod/web created (resourceVersion 2, uid 2a9f4d5b)",
		"NAME   READY   STATUS",
		"web    0/1     Pending   0          5s",
	}, "\n")
	tests := []struct {
		name string
		want []string
		miss int
	}{
		{"every line, in order", []string{"ok root running as root", "pod/web created"}, -1},
		{"a substring of a line", []string{"Pending"}, -1},
		{"runs of spaces count as one", []string{"web 0/1 Pending"}, -1},
		{"… matches anything", []string{"store (etcd's role): …/etcd/store.db (revision 1)", "pod/web created (resourceVersion …, uid …)"}, -1},
		{"… at both ends", []string{"…READY…"}, -1},
		{"nothing wanted", nil, -1},
		{"a missing line", []string{"ok root", "no such line"}, 1},
		{"out of order", []string{"Pending", "pod/web created"}, 1},
		{"one output line per wanted line", []string{"Pending", "Pending"}, 1},
		{"… parts in order", []string{"uid … resourceVersion"}, 0},
		{"not a substring across lines", []string{"STATUS web"}, 0},
		{"case matters", []string{"pending"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lesson.FirstMissing(tt.want, output); got != tt.miss {
				t.Errorf("FirstMissing(%q) = %d, want %d", tt.want, got, tt.miss)
			}
		})
	}
}

func TestBlock_Script(t *testing.T) {
	const guard = ` || { echo "lesson: the command above was expected to fail, but it succeeded" >&2; false; }`
	tests := []struct {
		name, code, want string
	}{
		{"left alone", "podlab init\necho '! not a command'\n", "podlab init\necho '! not a command'\n"},
		{"a negated command", "! podlab run db --as viewer\n", "! podlab run db --as viewer" + guard + "\n"},
		{"indented", "  ! false\n", "  ! false" + guard + "\n"},
		{"a trailing comment stays a comment", "! ls x   # no such file\n", "! ls x" + guard + "  # no such file\n"},
		{"a # inside quotes is not a comment", "! grep '# x' f\n", "! grep '# x' f" + guard + "\n"},
		{"continued lines", "! podlab spec --bundle b \\\n  --user nobody\necho next\n", "! podlab spec --bundle b \\\n  --user nobody" + guard + "\necho next\n"},
		{"a here-document's body is data", "cat <<'EOF'\n! not negated\nEOF\n! false\n", "cat <<'EOF'\n! not negated\nEOF\n! false" + guard + "\n"},
		{"!x is not a negation", "!true\n", "!true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &lesson.Block{Kind: lesson.Run, Info: "sh", Code: tt.code}
			if got := b.Script(); got != tt.want {
				t.Errorf("Script() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestBlock_Script_Bash runs scripts in bash -e: a negated command that
// succeeds stops it, one that fails does not.
func TestBlock_Script_Bash(t *testing.T) {
	bash := testenv.LookPath(t, "bash") // skips outside CI, fails in CI
	tests := []struct {
		name   string
		code   string
		ok     bool
		output string
	}{
		{"a command that fails as expected", "! false\necho after\n", true, "after"},
		{"a command that succeeds when it should fail", "! true\necho after\n", false, "expected to fail, but it succeeded"},
		{"continued, with a comment", "! test \\\n  1 = 1  # equal\necho after\n", false, "expected to fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &lesson.Block{Kind: lesson.Run, Info: "sh", Code: tt.code}
			out, err := exec.Command(bash, "-e", "-c", b.Script()).CombinedOutput()
			if (err == nil) != tt.ok || !strings.Contains(string(out), tt.output) {
				t.Errorf("bash -e: err %v, output %q; want ok=%v and %q", err, out, tt.ok, tt.output)
			}
		})
	}
}
