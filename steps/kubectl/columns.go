package kubectl

import (
	"io"
	"strings"
	"unicode/utf8"
)

// The layout of kubectl's tables: text/tabwriter with a minimum cell width
// of 6 and 3 spaces of padding; the last column is not padded.
const (
	tableMinWidth = 6
	tablePadding  = 3
)

// aligner lays rows out in columns as text/tabwriter does with kubectl's
// settings, and remembers the widths between calls: `get -w` prints the
// header once and then one row per change, and each row must line up with
// the header. text/tabwriter forgets widths at every Flush; kubectl uses a
// fork of it (github.com/liggitt/tabwriter) with a RememberWidths flag for
// exactly this, which aligner reproduces.
type aligner struct {
	widths []int
}

// write writes rows aligned; every row must have the same number of cells.
func (a *aligner) write(w io.Writer, rows [][]string) error {
	for _, row := range rows {
		for i, cell := range row[:max(len(row)-1, 0)] {
			width := max(utf8.RuneCountInString(cell)+tablePadding, tableMinWidth)
			if i >= len(a.widths) {
				a.widths = append(a.widths, 0)
			}
			a.widths[i] = max(a.widths[i], width)
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", a.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cleanCell keeps a cell on one line, as kubectl's table printer does: it
// cuts at the first line break and adds "...", and a tab would break the
// columns, so it becomes a space.
func cleanCell(s string) string {
	if i := strings.IndexAny(s, "\f\n\r"); i >= 0 {
		s = s[:i] + "..."
	}
	return strings.ReplaceAll(s, "\t", " ")
}
