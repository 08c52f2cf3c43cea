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

// podlabLesson runs `podlab lesson ARGS` and returns its standard output
// and standard error apart: the note about a missing translation goes to
// the second.
func podlabLesson(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	err = app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", t.TempDir(), "lesson"}, args...)))
	return out.String(), errOut.String(), err
}

// setLocale sets the locale's variables for one test: those not in env
// are set empty, which LangFromEnv reads as unset.
func setLocale(t *testing.T, env map[string]string) {
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		t.Setenv(k, env[k])
	}
}

// zhLessons writes a lessons' directory with lessons 01 and 02, only 01
// translated, and returns it.
func zhLessons(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{
		"01-setup.md":       "# 01 — Set up\n\n## Commands\n\n```sh\necho one\n```\n",
		"02-apiserver.md":   "# 02 — The gate\n\n## Commands\n\n```sh\necho two\n```\n",
		"zh-TW/01-setup.md": "# 01 — 準備\n\n## 命令\n\n```sh\necho one\n```\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLessonCommand_Lang(t *testing.T) {
	dir := zhLessons(t)
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		want   []string // in the standard output
		absent []string // not in the standard output
		note   bool     // the one line saying the lesson is not translated
	}{
		{"built in, --lang zh-TW", nil, []string{"1", "--lang", "zh-TW"},
			[]string{"01 — 準備：", "\n為什麼重要\n----------\n", "\n命令\n----\n", "\n驗證\n----\n", "\n下一課\n------\n", "    podlab doctor\n"},
			[]string{"Why it matters"}, false},
		{"built in, LANG=zh_TW.UTF-8", map[string]string{"LANG": "zh_TW.UTF-8"}, []string{"01"},
			[]string{"01 — 準備：", "\n為什麼重要\n"}, []string{"Why it matters"}, false},
		{"built in, LANG=zh_TW.UTF-8 but --lang en", map[string]string{"LANG": "zh_TW.UTF-8"}, []string{"1", "--lang", "en"},
			[]string{"01 — Set up: the machine", "\nWhy it matters\n"}, []string{"為什麼重要"}, false},
		{"built in, LC_ALL=C over LANG=zh_TW", map[string]string{"LC_ALL": "C", "LANG": "zh_TW.UTF-8"}, []string{"1"},
			[]string{"01 — Set up: the machine"}, []string{"為什麼重要"}, false},
		{"built in, no locale", nil, []string{"1"},
			[]string{"01 — Set up: the machine"}, []string{"為什麼重要"}, false},
		{"built in list, LANG=zh_TW.UTF-8", map[string]string{"LANG": "zh_TW.UTF-8"}, nil,
			[]string{"LESSON", "01       準備：", "lessons/zh-TW/01-setup.md", "顯示一課：podlab lesson N。", "podlab lesson N --lang en"}, []string{"lessons/01-setup.md", "Show one"}, false},
		{"--dir, translated", nil, []string{"1", "--lang", "zh_TW", "--dir", dir},
			[]string{"01 — 準備\n", "    echo one\n"}, nil, false},
		{"--dir, not translated: english and a note", nil, []string{"2", "--lang", "zh-TW", "--dir", dir},
			[]string{"02 — The gate\n", "    echo two\n"}, nil, true},
		{"--dir, not translated, LANG says zh_TW", map[string]string{"LANG": "zh_TW.UTF-8"}, []string{"2", "--dir", dir},
			[]string{"02 — The gate\n"}, nil, true},
		{"--dir, english: no note", nil, []string{"2", "--dir", dir},
			[]string{"02 — The gate\n"}, nil, false},
		{"--dir list, zh-TW: each lesson's own file", nil, []string{"--lang", "zh-TW", "--dir", dir},
			[]string{"01       準備       " + filepath.Join(dir, "zh-TW", "01-setup.md"), "02       The gate   " + filepath.Join(dir, "02-apiserver.md")}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setLocale(t, tt.env)
			out, errOut, err := podlabLesson(t, tt.args...)
			if err != nil {
				t.Fatalf("podlab lesson %s: %v\n%s%s", strings.Join(tt.args, " "), err, out, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("podlab lesson %s lacks %q:\n%s", strings.Join(tt.args, " "), want, out)
				}
			}
			for _, absent := range tt.absent {
				if strings.Contains(out, absent) {
					t.Errorf("podlab lesson %s has %q:\n%s", strings.Join(tt.args, " "), absent, out)
				}
			}
			note := "第 02 課還沒有繁體中文翻譯，以下是英文原文。(lesson 02 is not translated into zh-TW yet: showing the English)\n"
			switch {
			case tt.note && errOut != note:
				t.Errorf("podlab lesson %s: standard error %q, want the one line %q", strings.Join(tt.args, " "), errOut, note)
			case !tt.note && errOut != "":
				t.Errorf("podlab lesson %s: standard error %q, want none", strings.Join(tt.args, " "), errOut)
			}
			if strings.Contains(out, "還沒有") {
				t.Errorf("podlab lesson %s: the note is in the lesson's own output:\n%s", strings.Join(tt.args, " "), out)
			}
		})
	}
}

func TestLessonCommand_LangBad(t *testing.T) {
	broken := zhLessons(t)
	if err := os.WriteFile(filepath.Join(broken, "zh-TW", "03-store.md"), []byte("# 03 — 儲存\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
		is   error
	}{
		{"unknown language", []string{"1", "--lang", "fr"}, []string{`--lang "fr"`, "no lessons in that language", "use en", "zh-TW"}, lesson.ErrBadLang},
		{"simplified chinese", []string{"--lang", "zh-CN"}, []string{`--lang "zh-CN"`}, lesson.ErrBadLang},
		{"empty", []string{"1", "--lang="}, []string{`--lang ""`}, lesson.ErrBadLang},
		{"a translation with no english original", []string{"1", "--lang", "zh-TW", "--dir", broken},
			[]string{"the zh-TW lesson 03-store.md translates no lesson"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setLocale(t, nil)
			out, errOut, err := podlabLesson(t, tt.args...)
			if err == nil {
				t.Fatalf("podlab lesson %s: no error\n%s", strings.Join(tt.args, " "), out)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("podlab lesson %s: %q lacks %q", strings.Join(tt.args, " "), err, want)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("podlab lesson %s: %v, want %v", strings.Join(tt.args, " "), err, tt.is)
			}
			if out != "" {
				t.Errorf("podlab lesson %s printed a lesson or a list before failing:\n%s%s", strings.Join(tt.args, " "), out, errOut)
			}
		})
	}
}
