package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/steps/lesson"
)

// podlabWith runs podlab with cmd among its commands (whether app.go lists
// it yet or not) against state, and returns its output and error.
func podlabWith(t *testing.T, cmd *cli.Command, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	listed := false
	for _, c := range app.Commands {
		listed = listed || c.Name == cmd.Name
	}
	if !listed {
		app.Commands = append(app.Commands, cmd)
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func TestLessonCommand_List(t *testing.T) {
	out, err := podlabWith(t, lessonCommand, t.TempDir(), "lesson")
	if err != nil {
		t.Fatalf("podlab lesson: %v\n%s", err, out)
	}
	for _, want := range []string{
		"LESSON   TITLE",
		"01       Set up: the machine, runc, and a registry of your own",
		"lessons/01-setup.md",
		"02       The API server's gate",
		"lessons/09-runc.md",
		"Show one: podlab lesson N.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab lesson lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "01-setup.md"), strings.Index(out, "02-apiserver.md"); i < 0 || j < i {
		t.Errorf("lessons out of order:\n%s", out)
	}
}

func TestLessonCommand_Show(t *testing.T) {
	for _, arg := range []string{"2", "02"} {
		out, err := podlabWith(t, lessonCommand, t.TempDir(), "lesson", arg)
		if err != nil {
			t.Fatalf("podlab lesson %s: %v\n%s", arg, err, out)
		}
		title := "02 — The API server's gate: authentication, authorization, admission (the chain's steps 1 to 3)"
		for _, want := range []string{
			title + "\n" + strings.Repeat("=", len([]rune(title))) + "\n",
			"\nCommands\n--------\n",
			"\n    podlab init\n",
			"\n    ! podlab run db --image nginx --as viewer\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("podlab lesson %s lacks %q:\n%s", arg, want, out)
			}
		}
		if strings.Contains(out, "\x1b[") || strings.Contains(out, "```") {
			t.Errorf("podlab lesson %s to a buffer has ANSI escapes or fences:\n%s", arg, out)
		}
	}
}

func TestLessonCommand_Dir(t *testing.T) {
	dir := t.TempDir()
	text := "# 07 — Mine\n\n## Commands\n\n```sh\necho hi\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "07-mine.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := podlabWith(t, lessonCommand, t.TempDir(), "lesson", "--dir", dir)
	if err != nil || !strings.Contains(out, "07       Mine    "+filepath.Join(dir, "07-mine.md")) || strings.Contains(out, "01-setup") {
		t.Errorf("podlab lesson --dir: %v\n%s", err, out)
	}
	out, err = podlabWith(t, lessonCommand, t.TempDir(), "lesson", "7", "--dir", dir)
	if err != nil || !strings.Contains(out, "07 — Mine\n=========\n") || !strings.Contains(out, "    echo hi\n") {
		t.Errorf("podlab lesson 7 --dir: %v\n%s", err, out)
	}
}

func TestLessonCommand_Bad(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no such lesson", []string{"lesson", "99"}, "no such lesson 99"},
		{"not a number", []string{"lesson", "setup"}, `lesson "setup": want a number`},
		{"two numbers", []string{"lesson", "1", "2"}, "want one lesson number"},
		{"no such directory", []string{"lesson", "--dir", "/nonexistent/lessons"}, "listing the lessons"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := podlabWith(t, lessonCommand, t.TempDir(), tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("podlab %s: error %v, want one containing %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
			}
		})
	}
	if _, err := podlabWith(t, lessonCommand, t.TempDir(), "lesson", "99"); !errors.Is(err, lesson.ErrNotFound) {
		t.Errorf("podlab lesson 99: %v, want lesson.ErrNotFound", err)
	}
}
