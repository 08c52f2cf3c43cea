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

// A heading's rule is as wide as the heading on a terminal: a Chinese
// character takes two columns.
func TestRender_PlainWideHeadings(t *testing.T) {
	l, err := lesson.Parse(strings.NewReader("# 02 — API server 的關卡\n\n## 為什麼重要\n\n因為。\n\n## 命令（Commands）\n\n" + fence + "sh\necho hi\n" + fence + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := lesson.Render(&buf, l, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"02 — API server 的關卡\n" + strings.Repeat("=", 16+6) + "\n", // "02 — API server " and 的關卡
		"\n為什麼重要\n----------\n",
		"\n命令（Commands）\n" + strings.Repeat("-", 4+2+8+2) + "\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plain output lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestRenderList(t *testing.T) {
	ls := []*lesson.Lesson{
		{Number: 1, Title: "準備", File: "01-setup.md", Lang: lesson.TraditionalChinese},
		{Number: 2, Title: "The gate", File: "02-apiserver.md"},
	}
	var buf bytes.Buffer
	if err := lesson.RenderList(&buf, ls, "lessons"); err != nil {
		t.Fatal(err)
	}
	// 準備 is four columns wide: the FILE column starts at the same column
	// on every line.
	want := "" +
		"LESSON   TITLE      FILE\n" +
		"01       準備       lessons/zh-TW/01-setup.md\n" +
		"02       The gate   lessons/02-apiserver.md\n"
	if buf.String() != want {
		t.Errorf("RenderList:\n%s\nwant:\n%s", buf.String(), want)
	}
}
