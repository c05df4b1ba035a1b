package table

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWrite(t *testing.T) {
	cols := []Column{{Name: "ID"}, {Name: "NAME", Left: true}, {Name: "EXTRA", Wide: true}, {Name: "N"}}
	cases := []struct {
		name  string
		wide  bool
		build func(*Table)
		want  string
	}{
		{"default hides wide columns", false, func(t *Table) {
			t.Row("1", "alpha", "x", "10")
			t.Row("22", "b", "yy", "3")
		}, "ID   NAME     N\n 1   alpha   10\n22   b        3\n"},
		{"wide shows them", true, func(t *Table) {
			t.Row("1", "alpha", "x", "10")
		}, "ID   NAME    EXTRA    N\n 1   alpha       x   10\n"},
		{"notes wrap under their row, from the second column", false, func(t *Table) {
			t.Row("1", "a", "", "2")
			t.Note(strings.Repeat("word ", 30))
		}, "ID   NAME   N\n 1   a      2\n" +
			"     " + strings.TrimSpace(strings.Repeat("word ", 23)) + "\n" +
			"     " + strings.TrimSpace(strings.Repeat("word ", 7)) + "\n"},
		{"no rows", false, func(t *Table) {}, "ID   NAME   N\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab := New(cols...)
			c.build(tab)
			var b strings.Builder
			if err := tab.Write(&b, c.wide); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}

// TestFit: the default view cuts the Fit column so lines fit Width; the
// wide view never cuts.
func TestFit(t *testing.T) {
	tab := New(Column{Name: "A"}, Column{Name: "TEXT", Left: true, Fit: true})
	long := strings.Repeat("x", 200)
	tab.Row("1", long)
	tab.Row("2", "short")
	var b strings.Builder
	if err := tab.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if n := utf8.RuneCountInString(lines[1]); n != Width || !strings.HasSuffix(lines[1], "x…") {
		t.Errorf("cut line is %d columns: %q", n, lines[1])
	}
	if lines[2] != "2   short" {
		t.Errorf("short row %q", lines[2])
	}
	b.Reset()
	if err := tab.Write(&b, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), long) {
		t.Error("the wide view cut a cell")
	}
}

func TestWrap(t *testing.T) {
	cases := []struct {
		text  string
		width int
		want  string
	}{
		{"a b c", 80, "> a b c\n"},
		{"aaa bbb ccc", 9, "> aaa bbb\n  ccc\n"},
		{"toolongword x", 6, "> toolongword\n  x\n"},
		{"", 10, ""},
		{"µs µs µs", 7, "> µs µs\n  µs\n"}, // runes, not bytes
	}
	for _, c := range cases {
		var b strings.Builder
		Wrap(&b, c.text, "> ", "  ", c.width)
		if b.String() != c.want {
			t.Errorf("Wrap(%q, %d) = %q, want %q", c.text, c.width, b.String(), c.want)
		}
	}
}

func TestRowCountPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a row with the wrong number of cells did not panic")
		}
	}()
	New(Column{Name: "A"}).Row("1", "2")
}
