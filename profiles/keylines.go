package profiles

import (
	"fmt"
	"strings"
)

// keyLines indexes where each key of a TOML document is defined: key path →
// 1-based line. Paths name array elements by index, the way errors name them:
// "thread_groups[1].match.comm_prefix". The TOML library reports positions
// only for syntax errors, so this is what lets errors about unknown keys and
// bad values name their line.
//
// It is only run on documents the TOML parser has accepted, so it is lenient:
// on anything unexpected it skips ahead and never fails. The first definition
// of a path wins.
func keyLines(src []byte) map[string]int {
	x := &lineIndexer{s: string(src), line: 1, lines: map[string]int{}, arrays: map[string]int{}}
	x.document()
	return x.lines
}

type lineIndexer struct {
	s      string
	i      int
	line   int
	lines  map[string]int
	arrays map[string]int // array-of-tables path → elements seen so far
}

func (x *lineIndexer) eof() bool { return x.i >= len(x.s) }

func (x *lineIndexer) peek() byte {
	if x.eof() {
		return 0
	}
	return x.s[x.i]
}

// advance moves n bytes on, counting the newlines passed.
func (x *lineIndexer) advance(n int) {
	for ; n > 0 && !x.eof(); n-- {
		if x.s[x.i] == '\n' {
			x.line++
		}
		x.i++
	}
}

func (x *lineIndexer) record(path string) {
	if _, ok := x.lines[path]; !ok {
		x.lines[path] = x.line
	}
}

func (x *lineIndexer) skipSpace() {
	for !x.eof() && (x.peek() == ' ' || x.peek() == '\t') {
		x.i++
	}
}

// skipBlank skips spaces, newlines and comments.
func (x *lineIndexer) skipBlank() {
	for !x.eof() {
		switch x.peek() {
		case ' ', '\t', '\r', '\n':
			x.advance(1)
		case '#':
			x.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the next newline (not past it).
func (x *lineIndexer) skipLine() {
	for !x.eof() && x.peek() != '\n' {
		x.i++
	}
}

func (x *lineIndexer) document() {
	table := ""
	for {
		x.skipBlank()
		if x.eof() {
			return
		}
		start := x.i
		if x.peek() == '[' {
			table = x.header()
		} else if keys := x.key(); len(keys) > 0 {
			path := x.define(table, keys)
			x.skipSpace()
			if x.peek() == '=' {
				x.i++
			}
			x.skipSpace()
			x.value(path)
		}
		x.skipLine()
		if x.i == start {
			x.advance(1)
		}
	}
}

// header reads a [table] or [[array.of.tables]] header and returns the
// table's path with array elements resolved to their current index.
func (x *lineIndexer) header() string {
	array := strings.HasPrefix(x.s[x.i:], "[[")
	if array {
		x.i += 2
	} else {
		x.i++
	}
	x.skipSpace()
	keys := x.key()
	path := ""
	for j, k := range keys {
		path = join(path, k)
		if array && j == len(keys)-1 {
			n := x.arrays[path]
			x.arrays[path] = n + 1
			x.record(path)
			path = fmt.Sprintf("%s[%d]", path, n)
		} else if n := x.arrays[path]; n > 0 {
			path = fmt.Sprintf("%s[%d]", path, n-1)
		}
		x.record(path)
	}
	return path
}

// define records a dotted key and its parents under table.
func (x *lineIndexer) define(table string, keys []string) string {
	path := table
	for _, k := range keys {
		path = join(path, k)
		x.record(path)
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// key reads a dotted key: bare, "quoted" or 'literal' parts joined by dots.
func (x *lineIndexer) key() []string {
	var parts []string
	for {
		x.skipSpace()
		part, ok := x.keyPart()
		if !ok {
			return parts
		}
		parts = append(parts, part)
		x.skipSpace()
		if x.peek() != '.' {
			return parts
		}
		x.i++
	}
}

func (x *lineIndexer) keyPart() (string, bool) {
	switch c := x.peek(); c {
	case '"', '\'':
		start := x.i + 1
		x.i++
		for !x.eof() && x.peek() != c && x.peek() != '\n' {
			if c == '"' && x.peek() == '\\' {
				x.i++
			}
			x.i++
		}
		end := min(x.i, len(x.s))
		if x.peek() == c {
			x.i++
		}
		return x.s[start:end], true
	}
	start := x.i
	for !x.eof() && isBareKeyByte(x.peek()) {
		x.i++
	}
	return x.s[start:x.i], x.i > start
}

func isBareKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value, indexing the keys of inline tables in it.
func (x *lineIndexer) value(path string) {
	switch x.peek() {
	case '"', '\'':
		x.str()
	case '[':
		x.array(path)
	case '{':
		x.inline(path)
	default:
		for !x.eof() && !strings.ContainsRune(",]}#\r\n", rune(x.peek())) {
			x.i++
		}
	}
}

func (x *lineIndexer) array(path string) {
	x.i++
	for n := 0; ; {
		x.skipBlank()
		switch x.peek() {
		case 0:
			return
		case ']':
			x.i++
			return
		case ',':
			x.i++
			continue
		}
		start := x.i
		x.value(fmt.Sprintf("%s[%d]", path, n))
		n++
		if x.i == start {
			x.advance(1)
		}
	}
}

func (x *lineIndexer) inline(path string) {
	x.i++
	for {
		x.skipBlank()
		switch x.peek() {
		case 0:
			return
		case '}':
			x.i++
			return
		case ',':
			x.i++
			continue
		}
		start := x.i
		if keys := x.key(); len(keys) > 0 {
			sub := x.define(path, keys)
			x.skipSpace()
			if x.peek() == '=' {
				x.i++
			}
			x.skipSpace()
			x.value(sub)
		}
		if x.i == start {
			x.advance(1)
		}
	}
}

// str skips a basic, literal or multi-line string.
func (x *lineIndexer) str() {
	q := x.s[x.i : x.i+1]
	if strings.HasPrefix(x.s[x.i:], q+q+q) {
		x.advance(3)
		for !x.eof() && !strings.HasPrefix(x.s[x.i:], q+q+q) {
			if q == `"` && x.peek() == '\\' {
				x.advance(1)
			}
			x.advance(1)
		}
		x.advance(3)
		// Up to two quotes may end the content right before the delimiter.
		for n := 0; n < 2 && x.peek() == q[0]; n++ {
			x.i++
		}
		return
	}
	x.i++
	for !x.eof() && x.peek() != q[0] && x.peek() != '\n' {
		if q == `"` && x.peek() == '\\' {
			x.i++
		}
		x.i++
	}
	if x.peek() == q[0] {
		x.i++
	}
}
