package lesson

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Sentinel errors.
var (
	// ErrNoTitle means a lesson does not start with its "# NN — Title" heading.
	ErrNoTitle = errors.New(`no lesson title: the first line must be "# NN — Title"`)
	// ErrBadBlock means a fenced block is not closed, or an expected block
	// does not follow a sh block.
	ErrBadBlock = errors.New("bad fenced block")
	// ErrNotFound means no lesson has the number asked for.
	ErrNotFound = errors.New("no such lesson")
)

// Kind is what the lessons' test does with a fenced block.
type Kind int

// The kinds of blocks.
const (
	// Shown blocks are printed, never run (info string console, text, or none).
	Shown Kind = iota
	// Run blocks (info string sh) are run by the lessons' test.
	Run
	// Expected blocks (info string expected) list the lines the Run block
	// before them must print.
	Expected
)

func (k Kind) String() string {
	switch k {
	case Run:
		return "run"
	case Expected:
		return "expected"
	}
	return "shown"
}

// Lesson is one parsed lesson file.
type Lesson struct {
	Number int    // NN, from the title
	Title  string // the title without its number: "The API server's gate: ..."
	// File is the file's name (02-apiserver.md) when it was read by List or
	// ParseFile; "" for Parse.
	File string
	// Lang is the language of a translation (TraditionalChinese) when
	// Translate read it; "" for the English original.
	Lang string
	// Sections are the "## " sections, in order. Text before the first one
	// (under the title) is a section with no Heading.
	Sections []*Section
}

// Section is one "## Heading" and what follows it up to the next.
type Section struct {
	Heading string
	Parts   []Part
}

// Part is either prose (Text, Markdown as written) or a fenced Block.
type Part struct {
	Text  string
	Block *Block
}

// Block is one fenced code block.
type Block struct {
	Kind Kind
	Info string // the info string's first word: "sh", "expected", "console", ""
	Code string // the lines between the fences, each ending in "\n"
	Line int    // the line of the opening fence, from 1
	// Expected is, for a Run block, the Expected block that follows it (with
	// only prose in between); nil if none does.
	Expected *Block
}

// Name is "02-apiserver" for the file 02-apiserver.md, else "lesson NN".
func (l *Lesson) Name() string {
	if l.File != "" {
		return strings.TrimSuffix(l.File, ".md")
	}
	return fmt.Sprintf("lesson %02d", l.Number)
}

// Blocks returns every fenced block, in order.
func (l *Lesson) Blocks() []*Block {
	var out []*Block
	for _, s := range l.Sections {
		for _, p := range s.Parts {
			if p.Block != nil {
				out = append(out, p.Block)
			}
		}
	}
	return out
}

// Runs returns the Run blocks, in order.
func (l *Lesson) Runs() []*Block {
	var out []*Block
	for _, b := range l.Blocks() {
		if b.Kind == Run {
			out = append(out, b)
		}
	}
	return out
}

// needsRE matches a line of a lesson's needs block: `podlab check NN`.
var needsRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^podlab check (\d{1,3})$`) })

// Needs lists the lessons whose work this one builds on, as it says in its
// first lines: an sh block under the title (before the first "## "
// section) whose every command is `podlab check NN`, which a learner runs
// to see that lesson NN's work is there (and what to do if it is not). A
// lesson with no such block needs nothing but lesson 01 (the machine, the
// registry and the variables it exports).
func (l *Lesson) Needs() []int {
	if len(l.Sections) == 0 || l.Sections[0].Heading != "" {
		return nil
	}
	for _, p := range l.Sections[0].Parts {
		if p.Block == nil || p.Block.Kind != Run {
			continue
		}
		var out []int
		for _, line := range strings.Split(strings.TrimSpace(p.Block.Code), "\n") {
			m := needsRE().FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				return nil
			}
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		return out
	}
	return nil
}

// Section returns the section with the heading, or nil.
func (l *Lesson) Section(heading string) *Section {
	for _, s := range l.Sections {
		if s.Heading == heading {
			return s
		}
	}
	return nil
}

// titleRE matches "# 02 — Title" (an em dash, en dash or hyphen).
var titleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#\s+(\d{1,3})\s+[—–-]\s+(\S.*?)\s*$`) })

// fenceRE matches an opening fence: up to 3 spaces, ``` or ~~~ (or
// longer), and an optional info string.
var fenceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)") })

// Parse reads a lesson. It checks the title and the blocks: every fence is
// closed, and every expected block follows a sh block.
func Parse(r io.Reader) (*Lesson, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	l := &Lesson{}
	var (
		lineNo  int
		titled  bool
		sec     = &Section{}
		text    []string
		lastRun *Block // the Run block an expected block would belong to
	)
	flush := func() {
		if t := strings.Trim(strings.Join(text, "\n"), "\n"); strings.TrimSpace(t) != "" {
			sec.Parts = append(sec.Parts, Part{Text: t})
		}
		text = text[:0]
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if !titled {
			if strings.TrimSpace(line) == "" {
				continue
			}
			m := titleRE().FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, ErrNoTitle)
			}
			l.Number, _ = strconv.Atoi(m[1])
			l.Title = m[2]
			titled = true
			continue
		}
		if m := fenceRE().FindStringSubmatch(line); m != nil {
			flush()
			b := &Block{Info: m[2], Line: lineNo}
			fence := m[1]
			closed := false
			var code strings.Builder
			for sc.Scan() {
				lineNo++
				inner := sc.Text()
				if closes(inner, fence) {
					closed = true
					break
				}
				code.WriteString(inner)
				code.WriteByte('\n')
			}
			if !closed {
				return nil, fmt.Errorf("line %d: %w: the %s block is never closed", b.Line, ErrBadBlock, fence)
			}
			b.Code = code.String()
			switch b.Info {
			case "sh":
				b.Kind = Run
				lastRun = b
			case "expected":
				b.Kind = Expected
				if lastRun == nil {
					return nil, fmt.Errorf("line %d: %w: an expected block must follow a sh block (with only prose in between)", b.Line, ErrBadBlock)
				}
				if len(b.Lines()) == 0 {
					return nil, fmt.Errorf("line %d: %w: the expected block is empty", b.Line, ErrBadBlock)
				}
				lastRun.Expected = b
				lastRun = nil
			default:
				b.Kind = Shown
				lastRun = nil
			}
			sec.Parts = append(sec.Parts, Part{Block: b})
			continue
		}
		if h, ok := strings.CutPrefix(line, "## "); ok {
			flush()
			if sec.Heading != "" || len(sec.Parts) > 0 {
				l.Sections = append(l.Sections, sec)
			}
			sec = &Section{Heading: strings.TrimSpace(h)}
			lastRun = nil
			continue
		}
		text = append(text, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the lesson: %w", err)
	}
	if !titled {
		return nil, ErrNoTitle
	}
	flush()
	if sec.Heading != "" || len(sec.Parts) > 0 {
		l.Sections = append(l.Sections, sec)
	}
	return l, nil
}

// closes reports whether line closes a block opened with fence: up to 3
// spaces, then the fence's character, at least as many times, and nothing
// else.
func closes(line, fence string) bool {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	t := strings.TrimRight(line[indent:], " \t")
	return indent <= 3 && len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}
