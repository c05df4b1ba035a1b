package record

import (
	"errors"
	"testing"
)

func TestParseAttach(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "auto", want: AttachAuto},
		{in: "tp_btf", want: AttachBTF},
		{in: "raw_tp", want: AttachRawTP},
		{in: "", bad: true},
		{in: "kprobe", bad: true},
	} {
		got, err := ParseAttach(tc.in)
		var oe *OptionError
		if tc.bad != (err != nil) || got != tc.want || (tc.bad && (!errors.As(err, &oe) || oe.Field != "Attach")) {
			t.Errorf("ParseAttach(%q) = %q, %v", tc.in, got, err)
		}
	}
}
