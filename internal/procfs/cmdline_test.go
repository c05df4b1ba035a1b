package procfs

import (
	"slices"
	"strings"
	"testing"
)

func TestCmdline(t *testing.T) {
	for _, tt := range []struct {
		in   string
		args []string
		str  string
	}{
		{"/usr/bin/redis-server\x00*:6379\x00", []string{"/usr/bin/redis-server", "*:6379"}, "/usr/bin/redis-server *:6379"},
		{"postgres: walwriter   \x00\x00\x00", []string{"postgres: walwriter   "}, "postgres: walwriter"},
		{"a\x00\x00b\x00", []string{"a", "", "b"}, "a  b"},
		{"no-nul", []string{"no-nul"}, "no-nul"},
		{"\x00", nil, ""},
		{"", nil, ""},
	} {
		c := Cmdline(tt.in)
		if got := c.Args(); !slices.Equal(got, tt.args) {
			t.Errorf("Cmdline(%q).Args() = %q, want %q", tt.in, got, tt.args)
		}
		if got := c.String(); got != tt.str {
			t.Errorf("Cmdline(%q).String() = %q, want %q", tt.in, got, tt.str)
		}
	}
}

// FuzzCmdline: String has no NUL and no trailing space, and Args joined
// with NULs is the command line without its trailing NULs.
func FuzzCmdline(f *testing.F) {
	for _, s := range []string{"a\x00b\x00", "", "\x00\x00", "x  \x00 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Cmdline(b)
		s := c.String()
		if strings.ContainsRune(s, 0) || strings.HasSuffix(s, " ") {
			t.Fatalf("String() = %q", s)
		}
		if got, want := strings.Join(c.Args(), "\x00"), strings.TrimRight(string(b), "\x00"); got != want {
			t.Fatalf("Args() joined = %q, want %q", got, want)
		}
	})
}
