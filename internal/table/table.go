// Package table renders the command line's tables in kubectl's manner:
// plain columns under an upper-case header, a default view that fits a
// 120-column terminal and a wide view (-o wide) with every column. Text
// too long for a row — a cluster's evidence, a caveat — goes in notes
// wrapped under the row instead of widening the table.
package table

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Width is the terminal width the default view fits.
const Width = 120

// gap separates columns.
const gap = "   "

// Column is one column of a table.
type Column struct {
	Name string
	// Left aligns the column to the left (text); numbers align right.
	Left bool
	// Wide shows the column only in the wide view.
	Wide bool
	// Fit cuts the column's cells with "…" in the default view when the
	// line would be wider than Width (at most one Fit column per table).
	Fit bool
}

// Table is a table being built row by row.
type Table struct {
	cols []Column
	rows []row
}

type row struct {
	cells []string
	notes []string
}

// New returns an empty table with the columns.
func New(cols ...Column) *Table { return &Table{cols: cols} }

// Row appends a row, one cell per column. A wrong number of cells is a
// programming error and panics.
func (t *Table) Row(cells ...string) {
	if len(cells) != len(t.cols) {
		panic(fmt.Sprintf("table: %d cells for %d columns", len(cells), len(t.cols)))
	}
	t.rows = append(t.rows, row{cells: cells})
}

// Note adds text under the last row (before any row: under the header),
// starting under the second column and wrapped at Width in both views.
func (t *Table) Note(text string) {
	if len(t.rows) == 0 {
		t.rows = append(t.rows, row{})
	}
	r := &t.rows[len(t.rows)-1]
	r.notes = append(r.notes, text)
}

// Write renders the table: every column when wide, else the default view.
func (t *Table) Write(w io.Writer, wide bool) error {
	var idx []int
	for i, c := range t.cols {
		if wide || !c.Wide {
			idx = append(idx, i)
		}
	}
	widths := make([]int, len(idx))
	for j, i := range idx {
		widths[j] = utf8.RuneCountInString(t.cols[i].Name)
		for _, r := range t.rows {
			if r.cells != nil {
				widths[j] = max(widths[j], utf8.RuneCountInString(r.cells[i]))
			}
		}
	}
	if !wide {
		total := len(gap) * (len(widths) - 1)
		for _, n := range widths {
			total += n
		}
		for j, i := range idx {
			if t.cols[i].Fit && total > Width {
				widths[j] = max(utf8.RuneCountInString(t.cols[i].Name), widths[j]-(total-Width))
			}
		}
	}
	var b strings.Builder
	line := func(cell func(i int) string) {
		var l strings.Builder
		for j, i := range idx {
			if j > 0 {
				l.WriteString(gap)
			}
			s := cut(cell(i), widths[j])
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(s))
			if t.cols[i].Left {
				l.WriteString(s + pad)
			} else {
				l.WriteString(pad + s)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(func(i int) string { return t.cols[i].Name })
	// Notes start under the second column, so the first column's values
	// stand out as the rows' starts.
	indent := strings.Repeat(" ", 2)
	if len(widths) > 1 {
		indent = strings.Repeat(" ", widths[0]+len(gap))
	}
	for _, r := range t.rows {
		if r.cells != nil {
			line(func(i int) string { return r.cells[i] })
		}
		for _, n := range r.notes {
			Wrap(&b, n, indent, indent, Width)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cut shortens s to n runes, ending in "…" when it had more.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// Wrap writes text as lines of at most width runes, breaking at spaces:
// the first line starts with indent, the others with hang. A word longer
// than a line gets a line of its own.
func Wrap(b *strings.Builder, text, indent, hang string, width int) {
	prefix := indent
	n := utf8.RuneCountInString(prefix)
	start := true
	for _, word := range strings.Fields(text) {
		wn := utf8.RuneCountInString(word)
		if !start && n+1+wn > width {
			b.WriteByte('\n')
			prefix = hang
			n = utf8.RuneCountInString(prefix)
			start = true
		}
		if start {
			b.WriteString(prefix)
			start = false
		} else {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += wn
	}
	if !start {
		b.WriteByte('\n')
	}
}
