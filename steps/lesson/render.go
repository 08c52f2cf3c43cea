package lesson

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
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
		fmt.Fprintf(bw, "%s\n%s\n", title, strings.Repeat(titleRule, utf8.RuneCountInString(title)))
	}
	for _, s := range l.Sections {
		if s.Heading != "" {
			if terminal {
				fmt.Fprintf(bw, "\n%s%s%s\n", ansiBold, s.Heading, ansiReset)
			} else {
				fmt.Fprintf(bw, "\n%s\n%s\n", s.Heading, strings.Repeat(headingRule, utf8.RuneCountInString(s.Heading)))
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
