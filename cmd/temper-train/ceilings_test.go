package main

import (
	"strings"
	"testing"
)

// TestNoCeilingsFlag checks that every command choosing a backend has
// --no-ceilings in its help and refuses it, in one line, with the CFS
// backend (which has no ceilings of its own: the kernel enforces cpu.max).
// The refusal comes before any target is resolved or lease taken.
func TestNoCeilingsFlag(t *testing.T) {
	for _, args := range [][]string{
		{"apply", "p.toml", "--pid", "1"},
		{"refine", "p.toml", "--pid", "1", "--bench", "true"},
		{"train", "--id", "x", "--pid", "1", "--bench", "true"},
		{"canary", "--id", "x", "--pid", "1", "--bench", "true", "--interval", "1m"},
	} {
		_, stdout, _ := runCLI(args[0], "--help")
		if !strings.Contains(stdout, "--no-ceilings") {
			t.Errorf("%s --help lacks --no-ceilings", args[0])
		}
		code, _, stderr := runCLI(append(args, "--backend", "cfs", "--no-ceilings")...)
		// A usage error's one line, then the pointer to --help.
		first, _, _ := strings.Cut(stderr, "\n")
		if code != exitUsage || !strings.Contains(first, "--no-ceilings: only the sched_ext backend has CPU ceilings to turn off") {
			t.Errorf("%s --backend cfs --no-ceilings: exit %d, stderr %q; want a one-line usage error", args[0], code, stderr)
		}
	}
}
