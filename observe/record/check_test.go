//go:build linux

package record

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestOptionsCheck(t *testing.T) {
	good := Options{Duration: time.Second, BufferBytes: 16 << 20}
	page := os.Getpagesize()
	cases := []struct {
		name  string
		edit  func(*Options)
		field string
		text  string
	}{
		{"good", func(*Options) {}, "", ""},
		{"bounds", func(o *Options) { o.MaxEvents, o.MaxBytes = 500, 1<<20 }, "", ""},
		{"attach btf", func(o *Options) { o.Attach = AttachBTF }, "", ""},
		{"one page", func(o *Options) { o.BufferBytes = page }, "", ""},
		{"no duration", func(o *Options) { o.Duration = 0 }, "Duration", "Duration must be positive, got 0s"},
		{"negative events", func(o *Options) { o.MaxEvents = -1 }, "MaxEvents", "MaxEvents must be ≥ 0, got -1"},
		{"negative bytes", func(o *Options) { o.MaxBytes = -1 }, "MaxBytes", "MaxBytes must be ≥ 0, got -1"},
		{"no buffer", func(o *Options) { o.BufferBytes = 0 }, "BufferBytes", "power of two"},
		{"odd buffer", func(o *Options) { o.BufferBytes = 3000 }, "BufferBytes", "got 3000"},
		{"half page", func(o *Options) { o.BufferBytes = page / 2 }, "BufferBytes", "power of two"},
		{"huge buffer", func(o *Options) { o.BufferBytes = 2 << 30 }, "BufferBytes", "and 1GiB"},
		{"attach", func(o *Options) { o.Attach = "kprobe" }, "Attach", `got "kprobe"`},
	}
	for _, c := range cases {
		o := good
		c.edit(&o)
		err := o.Check()
		var oe *OptionError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.field == "":
		case !errors.As(err, &oe) || oe.Field != c.field || !strings.Contains(err.Error(), c.text):
			t.Errorf("%s: %v; want an OptionError for %s saying %q", c.name, err, c.field, c.text)
		}
	}
}
