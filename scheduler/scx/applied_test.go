package scx

import (
	"errors"
	"strings"
	"testing"
)

func TestExitInfo(t *testing.T) {
	tests := []struct {
		info   ExitInfo
		want   string
		byUser bool
	}{
		{ExitInfo{Kind: 64, Reason: "unregistered from user space"}, "UNREG (64): unregistered from user space", true},
		{ExitInfo{Kind: 67, Reason: "disabled by sysrq-S"}, "SYSRQ (67): disabled by sysrq-S", false},
		{ExitInfo{Kind: 1026, Reason: "runnable task stall", Msg: "kworker/3:1[77] failed to run for 30.5s"},
			"ERROR_STALL (1026): runnable task stall: kworker/3:1[77] failed to run for 30.5s", false},
		{ExitInfo{Kind: 1025, Reason: "scx_bpf_error", Msg: "bad layer"}, "ERROR_BPF (1025): scx_bpf_error: bad layer", false},
		{ExitInfo{Kind: 2048}, "kind 2048 (2048)", false},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.info.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if tt.info.byUser() != tt.byUser {
				t.Errorf("byUser() = %v", !tt.byUser)
			}
			var err error = &EjectedError{Info: tt.info}
			if !errors.Is(err, ErrEjected) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("EjectedError %q: want one line wrapping ErrEjected with %q", err, tt.want)
			}
		})
	}
}

func TestLogTail(t *testing.T) {
	log := []string{"0: R1=ctx() R10=fp0", "1: (79) r0 = *(u64 *)(r10 +8)", "invalid read from stack off 8+0 size 8",
		"processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0"}
	got := logTail(log, 2)
	want := "  verifier: 1: (79) r0 = *(u64 *)(r10 +8)\n  verifier: invalid read from stack off 8+0 size 8"
	if got != want {
		t.Errorf("logTail:\n%s\nwant:\n%s", got, want)
	}
}

func TestCString(t *testing.T) {
	for in, want := range map[string]string{"disabled by sysrq-S\x00junk": "disabled by sysrq-S", "": "", "no nul": "no nul"} {
		if got := cString([]byte(in)); got != want {
			t.Errorf("cString(%q) = %q, want %q", in, got, want)
		}
	}
}
