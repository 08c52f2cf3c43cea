package lesson_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/podlab/podlab/steps/lesson"
)

func TestRender_Plain(t *testing.T) {
	l, err := lesson.Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := lesson.Render(&buf, l, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"02 — The gate: a test\n=====================\n",
		"\nWhy it matters\n--------------\n",
		"Create it:\n\n    podlab init\n    ! podlab run db --as viewer  # refused\n",
		"    store (etcd's role):  …/etcd/store.db\n",
		"    podlab get pods -w\n",
		"\n[03](03-store.md)\n", // prose as written
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("plain output has ANSI escapes:\n%q", out)
	}
	if strings.Contains(out, fence) {
		t.Errorf("plain output shows the fences:\n%s", out)
	}
}

func TestRender_Terminal(t *testing.T) {
	l, err := lesson.Parse(strings.NewReader("# 01 — Set up\n\n## Commands\n\nRun `podlab doctor`, **as root**:\n\n" + fence + "sh\npodlab doctor\n" + fence + "\n" + fence + "expected\nok root\n" + fence + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := lesson.Render(&buf, l, true); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"\x1b[1;4m01 — Set up\x1b[0m\n",      // bold, underlined title
		"\x1b[1mCommands\x1b[0m\n",           // bold heading
		"Run \x1b[36mpodlab doctor\x1b[0m, ", // inline code
		"\x1b[1mas root\x1b[0m",              // bold prose
		"    \x1b[36mpodlab doctor\x1b[0m\n", // a command
		"    \x1b[90mok root\x1b[0m\n",       // expected output
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "=====") || strings.Contains(out, "`") {
		t.Errorf("terminal output has plain-text underlines or backticks:\n%q", out)
	}
}
