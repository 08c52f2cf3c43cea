package lesson

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/text/width"
)

// ANSI escapes for a terminal: plain SGR codes, no terminal database.
const (
	ansiReset   = "\x1b[0m"
	ansiBold    = "\x1b[1m"
	ansiTitle   = "\x1b[1;4m" // bold, underlined
	ansiCommand = "\x1b[36m"  // cyan: what you type
	ansiOutput  = "\x1b[90m"  // grey: what it prints
	ansiInline  = "\x1b[36m"  // `code` in prose
)

// In plain text, a heading is underlined and code is indented.
const (
	titleRule   = "="
	headingRule = "-"
	codeIndent  = "    "
)

// Render writes the lesson for reading. For a pipe or a file (terminal
// false) it is plain text: headings underlined, code blocks indented by four
// spaces, prose as written. On a terminal, headings are bold, commands
// (sh and console blocks) cyan, expected and other output grey, and
// `code` and **bold** in prose are shown as such.
func Render(w io.Writer, l *Lesson, terminal bool) error {
	bw := bufio.NewWriter(w)
	title := fmt.Sprintf("%02d — %s", l.Number, l.Title)
	if terminal {
		fmt.Fprintf(bw, "%s%s%s\n", ansiTitle, title, ansiReset)
	} else {
		fmt.Fprintf(bw, "%s\n%s\n", title, strings.Repeat(titleRule, columns(title)))
	}
	for _, s := range l.Sections {
		if s.Heading != "" {
			if terminal {
				fmt.Fprintf(bw, "\n%s%s%s\n", ansiBold, s.Heading, ansiReset)
			} else {
				fmt.Fprintf(bw, "\n%s\n%s\n", s.Heading, strings.Repeat(headingRule, columns(s.Heading)))
			}
		}
		for _, p := range s.Parts {
			bw.WriteString("\n")
			if p.Block == nil {
				writeProse(bw, p.Text, terminal)
				continue
			}
			writeBlock(bw, p.Block, terminal)
		}
	}
	return bw.Flush()
}

// RenderList writes the lessons' index: LESSON, TITLE and FILE (dir joined
// with a translation's language and the file's name), in columns that stay
// aligned on a terminal when titles are Chinese (text/tabwriter counts a
// wide character as one column).
func RenderList(w io.Writer, lessons []*Lesson, dir string) error {
	rows := [][3]string{{"LESSON", "TITLE", "FILE"}}
	for _, l := range lessons {
		rows = append(rows, [3]string{fmt.Sprintf("%02d", l.Number), l.Title, filepath.Join(dir, l.Lang, l.File)})
	}
	var wide [2]int
	for _, r := range rows {
		wide[0], wide[1] = max(wide[0], columns(r[0])), max(wide[1], columns(r[1]))
	}
	bw := bufio.NewWriter(w)
	for _, r := range rows {
		fmt.Fprintf(bw, "%s%s%s%s%s\n", r[0], pad(r[0], wide[0]+3), r[1], pad(r[1], wide[1]+3), r[2])
	}
	return bw.Flush()
}

// pad is the spaces that make s n columns wide.
func pad(s string, n int) string {
	return strings.Repeat(" ", max(n-columns(s), 0))
}

// columns is how many columns s takes on a terminal: two for each wide or
// full-width character (為什麼重要 is ten), one for the others, so that a
// heading's rule is as long as the heading in every language.
func columns(s string) int {
	n := 0
	for _, r := range s {
		switch width.LookupRune(r).Kind() {
		case width.EastAsianWide, width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}

func writeBlock(w io.Writer, b *Block, terminal bool) {
	color := ansiOutput
	if b.Kind == Run || b.Info == "console" {
		color = ansiCommand
	}
	for _, line := range strings.Split(strings.TrimRight(b.Code, "\n"), "\n") {
		switch {
		case line == "":
			fmt.Fprintln(w)
		case terminal:
			fmt.Fprintf(w, "%s%s%s%s\n", codeIndent, color, line, ansiReset)
		default:
			fmt.Fprintf(w, "%s%s\n", codeIndent, line)
		}
	}
}

var (
	inlineCode = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`([^`\n]+)`") })
	strong     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*([^*\n]+)\*\*`) })
)

func writeProse(w io.Writer, text string, terminal bool) {
	if terminal {
		text = inlineCode().ReplaceAllString(text, ansiInline+"$1"+ansiReset)
		text = strong().ReplaceAllString(text, ansiBold+"$1"+ansiReset)
		// "### Heading" inside a section.
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			if h, ok := strings.CutPrefix(l, "### "); ok {
				lines[i] = ansiBold + h + ansiReset
			}
		}
		text = strings.Join(lines, "\n")
	}
	fmt.Fprintln(w, text)
}
