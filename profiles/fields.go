package profiles

import (
	"reflect"
	"strings"
)

// tomlField is one struct field as the schema names it.
type tomlField struct {
	name      string
	omitempty bool
	index     int
}

// fieldsOf lists t's fields that have a toml tag, in declaration order: the
// order keys are written in and listed in "known:" hints.
func fieldsOf(t reflect.Type) []tomlField {
	var fs []tomlField
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("toml")
		if !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fs = append(fs, tomlField{name: name, omitempty: strings.Contains(opts, "omitempty"), index: i})
	}
	return fs
}

func fieldNames(fs []tomlField) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return names
}

// closest returns the known name within edit distance 2 of name (or equal
// ignoring case), for "did you mean" hints; "" when none is close.
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
