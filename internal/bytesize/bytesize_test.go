package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"512B", 512, ""},
		{"64KiB", 64 << 10, ""},
		{"16MiB", 16 << 20, ""},
		{"16 M", 16 << 20, ""},
		{" 1G ", 1 << 30, ""},
		{"2TB", 2 << 40, ""},
		{"lots", 0, "is not a size"},
		{"-1", 0, "is not a size"},
		{"1.5MiB", 0, "is not a size"},
		{"99999999999999999999", 0, "out of range"},
		{"9999999999T", 0, "too large"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Parse(%q) = %d, %v; want an error saying %q", c.in, got, err, c.wantErr)
			}
		case err != nil || got != c.want:
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{16 << 20, "16.0 MiB"},
		{3 << 30, "3.0 GiB"},
	}
	for _, c := range cases {
		if got := Format(c.n); got != c.want {
			t.Errorf("Format(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
