package profiles

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// decoder fills schema structs from the generic tree the TOML parser
// returns, strictly: keys are matched exactly (the TOML library would match
// them ignoring case), unknown keys and wrong types are errors naming the
// key's path and line, and empty arrays decode to nil so that a profile
// reads back the same after Marshal.
type decoder struct {
	file  string
	lines map[string]int
	errs  []*ParseError
}

func (d *decoder) fail(path string, sentinel error, format string, args ...any) {
	d.errs = append(d.errs, &ParseError{File: d.file, Line: d.line(path), Key: path, Msg: fmt.Sprintf(format, args...), Err: sentinel})
}

// line finds the line of path, or of its nearest parent the index knows.
func (d *decoder) line(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		cut := strings.LastIndexAny(path, ".[")
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}

// first returns the error earliest in the file (errors without a line last).
func (d *decoder) first() *ParseError {
	if len(d.errs) == 0 {
		return nil
	}
	errs := append([]*ParseError(nil), d.errs...)
	sort.SliceStable(errs, func(i, j int) bool {
		li, lj := errs[i].Line, errs[j].Line
		if li == 0 {
			li = math.MaxInt
		}
		if lj == 0 {
			lj = math.MaxInt
		}
		return li < lj
	})
	return errs[0]
}

func (d *decoder) table(path string, m map[string]any, v reflect.Value) {
	fields := fieldsOf(v.Type())
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		li, lj := d.line(join(path, keys[i])), d.line(join(path, keys[j]))
		if li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		sub := join(path, k)
		f, ok := fieldByName(fields, k)
		if !ok {
			known := fieldNames(fields)
			hint := ""
			if c := closest(k, known); c != "" {
				hint = fmt.Sprintf("did you mean %s? ", c)
			}
			d.fail(sub, ErrUnknownKey, "unknown key (%sknown: %s)", hint, strings.Join(known, ", "))
			continue
		}
		d.value(sub, m[k], v.Field(f.index))
	}
}

func fieldByName(fs []tomlField, name string) (tomlField, bool) {
	for _, f := range fs {
		if f.name == name {
			return f, true
		}
	}
	return tomlField{}, false
}

func (d *decoder) value(path string, val any, v reflect.Value) {
	switch v.Kind() {
	case reflect.Int:
		n, ok := val.(int64)
		if !ok {
			d.wrongType(path, "an integer", val)
			return
		}
		if v.OverflowInt(n) {
			d.fail(path, ErrType, "%d is out of range", n)
			return
		}
		v.SetInt(n)
	case reflect.Float64:
		var f float64
		switch x := val.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		default:
			d.wrongType(path, "a number", val)
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(path, ErrType, "%v is not a finite number", f)
			return
		}
		v.SetFloat(f)
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			d.wrongType(path, "a string", val)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			d.wrongType(path, "true or false", val)
			return
		}
		v.SetBool(b)
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		d.value(path, val, e.Elem())
		v.Set(e)
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			d.wrongType(path, "a table", val)
			return
		}
		d.table(path, m, v)
	case reflect.Slice:
		d.slice(path, val, v)
	default:
		panic(fmt.Sprintf("profiles: schema field %s has unsupported kind %s", path, v.Kind()))
	}
}

// slice decodes an array of values, or an array of tables into a slice of
// structs. Empty arrays stay nil.
func (d *decoder) slice(path string, val any, v reflect.Value) {
	var elems []any
	switch x := val.(type) {
	case []any:
		elems = x
	case []map[string]any:
		for _, m := range x {
			elems = append(elems, m)
		}
	default:
		d.wrongType(path, "an array", val)
		return
	}
	if len(elems) == 0 {
		return
	}
	s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
	for i, e := range elems {
		d.value(fmt.Sprintf("%s[%d]", path, i), e, s.Index(i))
	}
	v.Set(s)
}

func (d *decoder) wrongType(path, want string, got any) {
	d.fail(path, ErrType, "want %s, got %s", want, tomlType(got))
}

// tomlType names a parsed value's TOML type, for messages.
func tomlType(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("float %v", x)
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	default:
		return "a datetime"
	}
}
