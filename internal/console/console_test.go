package console

import (
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		quiet bool
		want  string
	}{
		{name: "progress", want: "one\nlog 1\n"},
		{name: "quiet", quiet: true, want: "log 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			l := NewLine(&b, tc.quiet, time.Hour)
			l.Update("one")
			l.Update("two") // within the interval: not repeated
			l.Log("log %d", 1)
			l.Done()
			if b.String() != tc.want {
				t.Errorf("wrote %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestOnce(t *testing.T) {
	var got []string
	note := Once(func(m string) { got = append(got, m) })
	for _, m := range []string{"a", "b", "a", "b", "c"} {
		note(m)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("printed %v, want a, b, c once each", got)
	}
}
