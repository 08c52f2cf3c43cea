package lesson_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/podlab/podlab/steps/lesson"
)

const fence = "```"

// sample is a small lesson in the convention's shape.
var sample = `# 02 — The gate: a test

Some words under the title.

## Why it matters

Because.

## Commands

Create it:

` + fence + `sh
podlab init
! podlab run db --as viewer  # refused
` + fence + `

Expected output:

` + fence + `expected
store (etcd's role):  …/etcd/store.db
  …
token file
` + fence + `

In a second terminal:

` + fence + `console
podlab get pods -w
` + fence + `

~~~~sh
echo tilde
~~~~

## Verification

` + fence + `
plain, shown
` + fence + `

## Next

[03](03-store.md)
`

func TestParse(t *testing.T) {
	l, err := lesson.Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if l.Number != 2 || l.Title != "The gate: a test" {
		t.Errorf("number %d, title %q", l.Number, l.Title)
	}
	var headings []string
	for _, s := range l.Sections {
		headings = append(headings, s.Heading)
	}
	if got, want := strings.Join(headings, "|"), "|Why it matters|Commands|Verification|Next"; got != want {
		t.Errorf("sections %q, want %q", got, want)
	}
	blocks := l.Blocks()
	type want struct {
		kind lesson.Kind
		info string
		line int
		code string
	}
	wants := []want{
		{lesson.Run, "sh", 13, "podlab init\n! podlab run db --as viewer  # refused\n"},
		{lesson.Expected, "expected", 20, "store (etcd's role):  …/etcd/store.db\n  …\ntoken file\n"},
		{lesson.Shown, "console", 28, "podlab get pods -w\n"},
		{lesson.Run, "sh", 32, "echo tilde\n"},
		{lesson.Shown, "", 38, "plain, shown\n"},
	}
	if len(blocks) != len(wants) {
		t.Fatalf("%d blocks, want %d", len(blocks), len(wants))
	}
	for i, w := range wants {
		b := blocks[i]
		if b.Kind != w.kind || b.Info != w.info || b.Line != w.line || b.Code != w.code {
			t.Errorf("block %d = {%v %q line %d %q}, want {%v %q line %d %q}", i, b.Kind, b.Info, b.Line, b.Code, w.kind, w.info, w.line, w.code)
		}
	}
	if blocks[0].Expected != blocks[1] {
		t.Error("the first sh block's Expected is not the expected block after it")
	}
	if blocks[3].Expected != nil {
		t.Error("the second sh block has an Expected block")
	}
	if got := len(l.Runs()); got != 2 {
		t.Errorf("%d Run blocks, want 2", got)
	}
	if got := blocks[1].Lines(); strings.Join(got, "|") != "store (etcd's role):  …/etcd/store.db|token file" {
		t.Errorf("expected lines %q", got)
	}
	if s := l.Section("Commands"); s == nil || len(s.Parts) != 7 {
		t.Errorf("section Commands: %+v", s)
	}
	if l.Section("Nope") != nil {
		t.Error("Section found a section that does not exist")
	}
}

func TestParse_Bad(t *testing.T) {
	tests := []struct {
		name, text string
		want       error
		msg        string
	}{
		{"empty", "", lesson.ErrNoTitle, ""},
		{"no number", "# Setup\n", lesson.ErrNoTitle, "line 1"},
		{"prose first", "Hello\n# 01 — Setup\n", lesson.ErrNoTitle, "line 1"},
		{"unclosed fence", "# 01 — A\n\n" + fence + "sh\necho\n", lesson.ErrBadBlock, "line 3"},
		{"shorter closing fence", "# 01 — A\n\n````sh\necho\n" + fence + "\n", lesson.ErrBadBlock, "never closed"},
		{"expected without sh", "# 01 — A\n\n" + fence + "expected\nx\n" + fence + "\n", lesson.ErrBadBlock, "must follow a sh block"},
		{"expected after console", "# 01 — A\n\n" + fence + "console\nx\n" + fence + "\n" + fence + "expected\nx\n" + fence + "\n", lesson.ErrBadBlock, "line 6"},
		{"two expected for one sh", "# 01 — A\n\n" + fence + "sh\nx\n" + fence + "\n" + fence + "expected\nx\n" + fence + "\n" + fence + "expected\ny\n" + fence + "\n", lesson.ErrBadBlock, "line 9"},
		{"expected across a section", "# 01 — A\n\n## C\n" + fence + "sh\nx\n" + fence + "\n## V\n" + fence + "expected\nx\n" + fence + "\n", lesson.ErrBadBlock, "must follow"},
		{"empty expected", "# 01 — A\n\n" + fence + "sh\nx\n" + fence + "\n" + fence + "expected\n…\n\n" + fence + "\n", lesson.ErrBadBlock, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lesson.Parse(strings.NewReader(tt.text))
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Parse error = %v, want %v with %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestListFS(t *testing.T) {
	lessonFile := func(n, title string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("# " + n + " — " + title + "\n\n## Commands\n")}
	}
	fsys := fstest.MapFS{
		"10-ten.md":   lessonFile("10", "Ten"),
		"02-two.md":   lessonFile("02", "Two"),
		"01-one.md":   lessonFile("01", "One"),
		"README.md":   {Data: []byte("not a lesson")},
		"notes.md":    {Data: []byte("not a lesson")},
		"03-draft.go": {Data: []byte("package x")},
	}
	all, err := lesson.ListFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range all {
		got = append(got, l.File+":"+l.Title)
	}
	if strings.Join(got, " ") != "01-one.md:One 02-two.md:Two 10-ten.md:Ten" {
		t.Errorf("ListFS = %q", got)
	}
	if l, err := lesson.Find(all, 2); err != nil || l.Name() != "02-two" {
		t.Errorf("Find(2) = %v, %v", l, err)
	}
	if _, err := lesson.Find(all, 7); !errors.Is(err, lesson.ErrNotFound) {
		t.Errorf("Find(7) error = %v, want ErrNotFound", err)
	}
}

func TestListFS_Bad(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		msg  string
	}{
		{"number differs from the title's", fstest.MapFS{"01-a.md": {Data: []byte("# 02 — A\n")}}, "its title says lesson 02, its file name 01"},
		{"two lessons with one number", fstest.MapFS{
			"01-a.md": {Data: []byte("# 01 — A\n")},
			"01-b.md": {Data: []byte("# 01 — B\n")},
		}, "the same number 01"},
		{"a lesson that does not parse", fstest.MapFS{"01-a.md": {Data: []byte("no title\n")}}, "lesson 01-a.md: line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lesson.ListFS(tt.fsys)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("ListFS error = %v, want one containing %q", err, tt.msg)
			}
		})
	}
}

func TestLesson_Needs(t *testing.T) {
	body := "\n## Why it matters\n\nx\n\n## Commands\n\n" + fence + "sh\npodlab check 03\n" + fence + "\n"
	tests := []struct {
		name string
		text string
		want []int
	}{
		{"one lesson", "# 05 — K\n\nNeeds 04:\n\n" + fence + "sh\npodlab check 04\n" + fence + "\n" + body, []int{4}},
		{"two lessons, an expected block after", "# 07 — U\n\n" + fence + "sh\npodlab check 05\npodlab check 06\n" + fence + "\n" + fence + "expected\nPASS x\n" + fence + "\n" + body, []int{5, 6}},
		{"prose only under the title", "# 02 — G\n\nStands alone.\n" + body, nil},
		{"a check in Commands is no need", "# 03 — S\n" + body, nil},
		{"a block that does more than check", "# 05 — K\n\n" + fence + "sh\npodlab check 04 || podlab run web --image nginx\n" + fence + "\n" + body, nil},
		{"a shown block is not run", "# 05 — K\n\n" + fence + "console\npodlab check 04\n" + fence + "\n" + body, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := lesson.Parse(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Needs(); !slices.Equal(got, tt.want) {
				t.Errorf("Needs() = %v, want %v", got, tt.want)
			}
		})
	}
}
