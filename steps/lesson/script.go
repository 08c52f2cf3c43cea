package lesson

import (
	"regexp"
	"strings"
	"sync"
)

// Ellipsis in an expected line matches anything.
const Ellipsis = "…"

// Lines returns the lines an Expected block asks for: each line trimmed,
// without blank lines and lines that are only "…" (they stand for output
// left out, which matching skips anyway).
func (b *Block) Lines() []string {
	var out []string
	for _, l := range strings.Split(b.Code, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == Ellipsis {
			continue
		}
		out = append(out, l)
	}
	return out
}

// Commands is the block's code without its trailing newline, for messages.
func (b *Block) Commands() string { return strings.TrimRight(b.Code, "\n") }

// FirstMissing matches want (lines of an Expected block) against output, in
// order: each wanted line must be found in a later output line than the one
// before it. A wanted line matches an output line when, both trimmed and
// with runs of spaces and tabs counted as one space, it is a substring of
// it; "…" in a wanted line matches any text. It returns the index in want of
// the first line not found, or -1 when every line was.
func FirstMissing(want []string, output string) int {
	lines := strings.Split(output, "\n")
	for i := range lines {
		lines[i] = squeeze(lines[i])
	}
	next := 0
	for i, w := range want {
		found := false
		for next < len(lines) {
			l := lines[next]
			next++
			if matchLine(w, l) {
				found = true
				break
			}
		}
		if !found {
			return i
		}
	}
	return -1
}

// matchLine reports whether the pattern w (with "…" wildcards) occurs in
// the squeezed line l.
func matchLine(w, l string) bool {
	pos := 0
	for _, part := range strings.Split(w, Ellipsis) {
		part = strings.TrimSpace(squeeze(part))
		if part == "" {
			continue
		}
		i := strings.Index(l[pos:], part)
		if i < 0 {
			return false
		}
		pos += i + len(part)
	}
	return true
}

var spaces = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[ \t]+`) })

// squeeze trims s and turns every run of spaces and tabs into one space.
func squeeze(s string) string { return spaces().ReplaceAllString(strings.TrimSpace(s), " ") }

// failGuard follows a command written "! command": with bash's set -e, a
// negated command never stops the session, so the guard does when the
// command succeeds.
const failGuard = ` || { echo "lesson: the command above was expected to fail, but it succeeded" >&2; false; }`

// heredocRE finds the delimiter of a here-document: <<EOF, <<-'EOF', <<"EOF".
var heredocRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`) })

// Script is the block's code as the lessons' test runs it: a command
// written "! command" (its own line, or lines joined by a trailing "\")
// must fail, so it gets a guard that stops the session when it succeeds.
// Everything else is left as written.
func (b *Block) Script() string {
	lines := strings.Split(strings.TrimRight(b.Code, "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		// One logical line: lines[i] up to the first line not ending in "\".
		end := i
		for end < len(lines)-1 && continues(lines[end]) {
			end++
		}
		logical := strings.Join(lines[i:end+1], "\n")
		negated := strings.HasPrefix(strings.TrimLeft(lines[i], " \t"), "! ")
		if negated {
			last := lines[end]
			code, comment := splitComment(last)
			lines[end] = strings.TrimRight(code, " \t") + failGuard
			if comment != "" {
				lines[end] += "  " + comment
			}
		}
		out = append(out, lines[i:end+1]...)
		i = end
		// A here-document's body is data: copy it through its delimiter.
		if m := heredocRE().FindStringSubmatch(logical); m != nil {
			for i+1 < len(lines) {
				i++
				out = append(out, lines[i])
				if strings.TrimLeft(lines[i], "\t") == m[1] {
					break
				}
			}
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// continues reports whether a shell line ends in an unescaped backslash.
func continues(line string) bool {
	n := len(line) - len(strings.TrimRight(line, `\`))
	return n%2 == 1
}

// splitComment splits a shell line at a "#" that starts a comment: outside
// quotes, at the start or after a space.
func splitComment(line string) (code, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], line[i:]
		}
	}
	return line, ""
}
