package lessons_test

// The translations of the lessons (lessons/zh-TW/) must not drift from the
// English ones: TestLessons runs the English lessons' sh blocks, so a
// translation whose blocks are the same, byte for byte and in order, is
// tested by that run too.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/podlab/podlab/lessons"
	"github.com/podlab/podlab/steps/lesson"
)

// translations are the languages every lesson is translated into, each in
// the lessons' sub-directory of its name, with the headings its lessons'
// four sections must have, in order.
var translations = []struct {
	lang     string
	headings []string
}{
	{lesson.TraditionalChinese, []string{"為什麼重要", "命令", "驗證", "下一課"}},
}

// TestTranslations checks every translation of every lesson, without
// running it: it exists, under the English lesson's file name; its fenced
// blocks (sh, expected, console, text, plain) are the English ones byte for
// byte, in the same order; it has as many "## " sections, the lab's four
// among them in the language's words; its links to other lessons name the
// translation next to it; and the indexes link to it. Its lessons' zh-TW
// README has the English README's blocks too.
func TestTranslations(t *testing.T) {
	all, err := lesson.List(".")
	if err != nil {
		t.Fatal(err)
	}
	topReadme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range translations {
		t.Run(tr.lang, func(t *testing.T) {
			// Every translation translates a lesson, here and in the copy
			// built into podlab.
			if _, err := lesson.Translate(os.DirFS("."), all, tr.lang); err != nil {
				t.Error(err)
			}
			if embedded, err := lesson.ListFS(lessons.Files); err != nil {
				t.Errorf("the embedded lessons: %v", err)
			} else if _, err := lesson.Translate(lessons.Files, embedded, tr.lang); err != nil {
				t.Errorf("the embedded lessons: %v", err)
			}
			files, _ := filepath.Glob(filepath.Join(tr.lang, "*.md"))
			for _, f := range files {
				name := filepath.Base(f)
				if name != "README.md" && name != "GLOSSARY.md" && !slices.ContainsFunc(all, func(l *lesson.Lesson) bool { return l.File == name }) {
					t.Errorf("%s translates no lesson: name it as the English lesson it translates", f)
				}
			}
			t.Run("README.md", func(t *testing.T) {
				en, zh := "README.md", filepath.Join(tr.lang, "README.md")
				if p := sameBlocks(en, zh); p != "" {
					t.Error(p)
				}
			})
			for _, l := range all {
				t.Run(l.Name(), func(t *testing.T) {
					zh := filepath.Join(tr.lang, l.File)
					if _, err := os.Stat(zh); err != nil {
						t.Fatalf("%s has no %s translation: write %s, with %s's fenced blocks copied byte for byte and its prose translated (%s/GLOSSARY.md fixes the terms)", l.File, tr.lang, zh, l.File, tr.lang)
					}
					if p := sameBlocks(l.File, zh); p != "" {
						t.Error(p)
					}
					tl, err := lesson.ParseFile(os.DirFS(tr.lang), l.File)
					if err != nil {
						t.Fatal(err)
					}
					if tl.Number != l.Number {
						t.Errorf("%s is titled lesson %02d, %s %02d", zh, tl.Number, l.File, l.Number)
					}
					if p := sameSections(l, tl, tr.headings); p != "" {
						t.Errorf("%s: %s", zh, p)
					}
					if p := translatedLinks(zh); p != "" {
						t.Errorf("%s: %s", zh, p)
					}
					for _, idx := range []struct {
						file string
						text []byte
						link string
					}{
						{"README.md", topReadme, "(lessons/" + tr.lang + "/" + l.File + ")"},
						{"lessons/README.md", readme, "(" + tr.lang + "/" + l.File + ")"},
					} {
						if !strings.Contains(string(idx.text), idx.link) {
							t.Errorf("%s's index does not link to %s: add %s", idx.file, zh, idx.link)
						}
					}
					if b, err := os.ReadFile(filepath.Join(tr.lang, "README.md")); err != nil || !strings.Contains(string(b), "("+l.File+")") {
						t.Errorf("%s/README.md's index does not link to %s (%v)", tr.lang, l.File, err)
					}
				})
			}
		})
	}
}

// rawBlock is a fenced block as written: its fences and the lines between.
type rawBlock struct {
	Line int    // the opening fence's line, from 1
	Text string // the fences and the lines between, each ending in "\n"
}

// fenceOpen is an opening fence: up to 3 spaces, ``` or ~~~ or longer.
var fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")

// rawBlocks returns the fenced blocks of a Markdown text as written, in
// order; a block never closed runs to the end.
func rawBlocks(text string) []rawBlock {
	lines := strings.SplitAfter(text, "\n")
	var out []rawBlock
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := rawBlock{Line: i + 1, Text: lines[i]}
		for i++; i < len(lines); i++ {
			b.Text += lines[i]
			t := strings.TrimRight(strings.TrimLeft(lines[i], " "), " \t\n")
			if len(lines[i])-len(strings.TrimLeft(lines[i], " ")) <= 3 && len(t) >= len(m[1]) && strings.Trim(t, m[1][:1]) == "" {
				break
			}
		}
		out = append(out, b)
	}
	return out
}

// sameBlocks says how the fenced blocks of the translation zh differ from
// those of en ("" if they do not): the first block that differs, with both
// texts.
func sameBlocks(en, zh string) string {
	a, err := os.ReadFile(en)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(zh)
	if err != nil {
		return err.Error()
	}
	ea, eb := rawBlocks(string(a)), rawBlocks(string(b))
	for i := range max(len(ea), len(eb)) {
		switch {
		case i >= len(eb):
			return fmt.Sprintf("%s has %d fenced blocks, %s %d: block %d (%s line %d) is missing:\n%s", zh, len(eb), en, len(ea), i+1, en, ea[i].Line, indent(ea[i].Text))
		case i >= len(ea):
			return fmt.Sprintf("%s has %d fenced blocks, %s %d: block %d (%s line %d) has no English original:\n%s", zh, len(eb), en, len(ea), i+1, zh, eb[i].Line, indent(eb[i].Text))
		case ea[i].Text != eb[i].Text:
			return fmt.Sprintf("block %d differs: commands and expected output stay as the English ones, byte for byte\n%s line %d:\n%s\n%s line %d:\n%s", i+1, en, ea[i].Line, indent(ea[i].Text), zh, eb[i].Line, indent(eb[i].Text))
		}
	}
	return ""
}

// sameSections says how the sections of the translation tl differ from
// those of the English l ("" if they do not): as many "## " sections, and
// the lab's four, translated as headings says, in order.
func sameSections(l, tl *lesson.Lesson, headings []string) string {
	var en, zh []string
	for _, s := range l.Sections {
		if s.Heading != "" {
			en = append(en, s.Heading)
		}
	}
	for _, s := range tl.Sections {
		if s.Heading != "" {
			zh = append(zh, s.Heading)
		}
	}
	if len(en) != len(zh) {
		return fmt.Sprintf("%d \"## \" sections, the English lesson %d:\n    English: %q\n    translated: %q", len(zh), len(en), en, zh)
	}
	at := -1
	for _, h := range headings {
		i := slices.Index(zh, h)
		if i < 0 || i < at {
			return fmt.Sprintf("sections %q: want %q among them, in that order", zh, headings)
		}
		at = i
	}
	return ""
}

// lessonLink is a Markdown link to a lesson file, with whatever directory.
var lessonLink = regexp.MustCompile(`\]\(([^)]*?)(\d\d-[a-z0-9-]+\.md)\)`)

// translatedLinks says which links of the translation zh do not name the
// translation next to it ("" if all do).
func translatedLinks(zh string) string {
	b, err := os.ReadFile(zh)
	if err != nil {
		return err.Error()
	}
	var bad []string
	for _, m := range lessonLink.FindAllStringSubmatch(string(b), -1) {
		switch {
		case m[1] != "":
			bad = append(bad, fmt.Sprintf("links to %s%s: link to the translation next to it, (%s)", m[1], m[2], m[2]))
		default:
			if _, err := os.Stat(filepath.Join(filepath.Dir(zh), m[2])); err != nil {
				bad = append(bad, fmt.Sprintf("links to %s, which is not translated yet", m[2]))
			}
		}
	}
	return strings.Join(bad, "; ")
}

// translatedAt is where block b of the English lesson l is in each
// translation, for a failure's message: "(the same block: zh-TW/02-apiserver.md
// line 40)", or "" when no translation has it.
func translatedAt(l *lesson.Lesson, b *lesson.Block) string {
	i := slices.Index(l.Blocks(), b)
	if i < 0 {
		return ""
	}
	var at []string
	for _, tr := range translations {
		tl, err := lesson.ParseFile(os.DirFS(tr.lang), l.File)
		if err != nil || i >= len(tl.Blocks()) {
			continue
		}
		at = append(at, fmt.Sprintf("%s line %d", filepath.Join(tr.lang, l.File), tl.Blocks()[i].Line))
	}
	if len(at) == 0 {
		return ""
	}
	return "\n(the same block in the translation: " + strings.Join(at, ", ") + ")"
}

// The checks above must fail when a translation drifts.
func TestSameBlocks(t *testing.T) {
	const fence = "```"
	en := "# 02 — The gate\n\n## Commands\n\nRun it:\n\n" + fence + "sh\npodlab init\n" + fence + "\n\nExpected output:\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n"
	tests := []struct {
		name string
		zh   string
		want []string // in the problem; none for a translation that keeps the blocks
	}{
		{"the same blocks, prose translated", "# 02 — 關卡\n\n## 命令\n\n執行：\n\n" + fence + "sh\npodlab init\n" + fence + "\n\n預期輸出：\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n", nil},
		{"a command translated", "# 02 — 關卡\n\n" + fence + "sh\npodlab 初始化\n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n",
			[]string{"block 1 differs", "en.md line 7:", "podlab init", "zh.md line 3:", "podlab 初始化"}},
		{"expected output translated", "# 02\n\n" + fence + "sh\npodlab init\n" + fence + "\n\n" + fence + "expected\n好\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n",
			[]string{"block 2 differs", "好"}},
		{"an info string changed", "# 02\n\n" + fence + "console\npodlab init\n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n",
			[]string{"block 1 differs", fence + "console"}},
		{"a trailing space", "# 02\n\n" + fence + "sh\npodlab init \n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n",
			[]string{"block 1 differs"}},
		{"a plain block left out", "# 02\n\n" + fence + "sh\npodlab init\n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n",
			[]string{"has 2 fenced blocks", "block 3", "is missing", "plain"}},
		{"a block added", "# 02\n\n" + fence + "sh\npodlab init\n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n\n" + fence + "\nplain\n" + fence + "\n\n" + fence + "sh\necho more\n" + fence + "\n",
			[]string{"has 4 fenced blocks", "block 4", "no English original", "echo more"}},
		{"blocks swapped", "# 02\n\n" + fence + "\nplain\n" + fence + "\n\n" + fence + "sh\npodlab init\n" + fence + "\n\n" + fence + "expected\nok\n" + fence + "\n",
			[]string{"block 1 differs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "en.md"), filepath.Join(dir, "zh.md")
			for f, text := range map[string]string{a: en, b: tt.zh} {
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := sameBlocks(a, b)
			if len(tt.want) == 0 && got != "" {
				t.Errorf("sameBlocks: %s, want nothing", got)
			}
			if len(tt.want) > 0 && got == "" {
				t.Errorf("sameBlocks found nothing wrong, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("sameBlocks: %s\nlacks %q", got, w)
				}
			}
		})
	}
}

func TestSameSections(t *testing.T) {
	parse := func(text string) *lesson.Lesson {
		l, err := lesson.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	en := parse("# 02 — The gate\n\n## Why it matters\n\n## Commands\n\n## A detour\n\n## Verification\n\n## Next\n")
	zh := translations[0].headings
	tests := []struct {
		name, text, want string
	}{
		{"translated", "# 02 — 關卡\n\n## 為什麼重要\n\n## 命令\n\n## 繞個路\n\n## 驗證\n\n## 下一課\n", ""},
		{"a section left out", "# 02 — 關卡\n\n## 為什麼重要\n\n## 命令\n\n## 驗證\n\n## 下一課\n", `4 "## " sections, the English lesson 5`},
		{"a heading left in English", "# 02 — 關卡\n\n## Why it matters\n\n## 命令\n\n## 繞個路\n\n## 驗證\n\n## 下一課\n", "want"},
		{"headings out of order", "# 02 — 關卡\n\n## 命令\n\n## 為什麼重要\n\n## 繞個路\n\n## 驗證\n\n## 下一課\n", "in that order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sameSections(en, parse(tt.text), zh)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("sameSections: %q, want %q", got, tt.want)
			}
		})
	}
}

// A failing block of TestLessons is named in each translation too.
func TestTranslatedAt(t *testing.T) {
	all, err := lesson.List(".")
	if err != nil {
		t.Fatal(err)
	}
	l, err := lesson.Find(all, 1)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := lesson.ParseFile(os.DirFS(lesson.TraditionalChinese), l.File)
	if err != nil {
		t.Skipf("no zh-TW %s: %v", l.File, err) // TestTranslations fails for it
	}
	for i, b := range l.Blocks() {
		want := fmt.Sprintf("(the same block in the translation: zh-TW/%s line %d)", l.File, tl.Blocks()[i].Line)
		if got := translatedAt(l, b); !strings.Contains(got, want) {
			t.Errorf("translatedAt(%s, block %d at line %d) = %q, want %q", l.File, i+1, b.Line, got, want)
		}
	}
	// A block of no lesson's has no place in a translation.
	if got := translatedAt(l, &lesson.Block{}); got != "" {
		t.Errorf("translatedAt of a block not in %s = %q, want \"\"", l.File, got)
	}
}
