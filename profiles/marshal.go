package profiles

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marshal writes p as schema v1 TOML. The output is deterministic — keys
// in the order of the Go struct fields, every section header present, match
// as an inline table, evidence as a [thread_groups.evidence] sub-table — so
// that regenerating a profile from the same analysis gives the same bytes
// and a changed profile a small git diff. Parse(Marshal(p)) equals p for any
// p Parse accepted.
//
// It fails on what TOML cannot carry (invalid UTF-8, NaN or infinite
// numbers); it does not lint.
func Marshal(p *Profile) ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("marshal profile: nil profile")
	}
	w := &writer{}
	w.keys("", reflect.ValueOf(p).Elem())
	w.section("fingerprint", "fingerprint", reflect.ValueOf(p.Fingerprint))
	w.section("machine_shape", "machine_shape", reflect.ValueOf(p.MachineShape))
	w.section("traits", "traits", reflect.ValueOf(p.Traits))
	for i := range p.ThreadGroups {
		g := reflect.ValueOf(&p.ThreadGroups[i]).Elem()
		w.buf.WriteString("\n[[thread_groups]]\n")
		path := fmt.Sprintf("thread_groups[%d]", i)
		w.keys(path, g)
		if e := p.ThreadGroups[i].Evidence; e != nil {
			w.section("thread_groups.evidence", path+".evidence", reflect.ValueOf(*e))
		}
	}
	if w.err != nil {
		return nil, fmt.Errorf("marshal profile %q: %w", p.ID, w.err)
	}
	return w.buf.Bytes(), nil
}

type writer struct {
	buf bytes.Buffer
	err error
}

// section writes a [header] and v's keys; path names v in errors.
func (w *writer) section(header, path string, v reflect.Value) {
	fmt.Fprintf(&w.buf, "\n[%s]\n", header)
	w.keys(path, v)
}

// keys writes v's fields that are values (not tables) as key = value lines.
// Struct fields are written as inline tables; pointers to structs and
// slices of structs are sections the caller writes.
func (w *writer) keys(path string, v reflect.Value) {
	for _, f := range fieldsOf(v.Type()) {
		fv := v.Field(f.index)
		if isSection(fv.Type()) || f.omitempty && fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Slice && fv.Len() == 0 {
			continue
		}
		w.buf.WriteString(f.name)
		w.buf.WriteString(" = ")
		w.value(join(path, f.name), fv)
		w.buf.WriteByte('\n')
	}
}

// isSection reports whether a field of type t is written as its own table.
func isSection(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return t == reflect.TypeFor[Fingerprint]() || t == reflect.TypeFor[Shape]() || t == reflect.TypeFor[Traits]()
	case reflect.Pointer:
		return t.Elem().Kind() == reflect.Struct
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Struct
	}
	return false
}

func (w *writer) value(path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Int:
		w.buf.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Float64:
		w.float(path, v.Float())
	case reflect.String:
		w.str(path, v.String())
	case reflect.Bool:
		w.buf.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Pointer:
		w.value(path, v.Elem())
	case reflect.Slice:
		w.buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				w.buf.WriteString(", ")
			}
			w.value(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
		w.buf.WriteByte(']')
	case reflect.Struct:
		// An inline table; {} when nothing is set.
		w.buf.WriteByte('{')
		n := 0
		for _, f := range fieldsOf(v.Type()) {
			fv := v.Field(f.index)
			if f.omitempty && fv.IsZero() || fv.Kind() == reflect.Slice && fv.Len() == 0 {
				continue
			}
			if n > 0 {
				w.buf.WriteByte(',')
			}
			fmt.Fprintf(&w.buf, " %s = ", f.name)
			w.value(join(path, f.name), fv)
			n++
		}
		if n > 0 {
			w.buf.WriteByte(' ')
		}
		w.buf.WriteByte('}')
	default:
		w.fail("%s: cannot write a %s", path, v.Kind())
	}
}

func (w *writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

// float writes the shortest decimal that reads back as f, always with a
// fraction or exponent so that TOML reads it as a float.
func (w *writer) float(path string, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.fail("%s: %v is not a finite number", path, f)
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	s := strconv.FormatFloat(f, format, -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	w.buf.WriteString(s)
}

// str writes s as a TOML basic string.
func (w *writer) str(path, s string) {
	if !utf8.ValidString(s) {
		w.fail("%s: %q is not valid UTF-8", path, s)
		return
	}
	w.buf.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			w.buf.WriteString(`\"`)
		case '\\':
			w.buf.WriteString(`\\`)
		case '\b':
			w.buf.WriteString(`\b`)
		case '\t':
			w.buf.WriteString(`\t`)
		case '\n':
			w.buf.WriteString(`\n`)
		case '\f':
			w.buf.WriteString(`\f`)
		case '\r':
			w.buf.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&w.buf, `\u%04X`, r)
			} else {
				w.buf.WriteRune(r)
			}
		}
	}
	w.buf.WriteByte('"')
}
