package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Stat is what this module reads from a process's or thread's stat line
// (proc_pid_stat(5)); fields are numbered as the manual numbers them.
type Stat struct {
	PID        int    // field 1: the process or thread id
	Comm       string // field 2, without its parentheses; may hold anything but NUL
	State      byte   // field 3: R, S, D, T, t, X, Z, P, I
	PPID       int    // field 4: the parent process
	Utime      uint64 // field 14: user CPU time, clock ticks
	Stime      uint64 // field 15: system CPU time, clock ticks
	Nice       int    // field 19
	StartTime  uint64 // field 22: when the task started, clock ticks after boot
	Processor  int    // field 39: the CPU it last ran on
	RTPriority int    // field 40
	Policy     int    // field 41: SCHED_OTHER (0), SCHED_FIFO (1), ...
}

// statFieldsWanted is how many fields ParseStat needs: every field up to
// the policy (41). Every kernel since 2.6 writes at least 44.
const statFieldsWanted = 41

// Exited reports whether the task has exited and only waits to be reaped
// (zombie Z, or dead X): it runs no more.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// StatFields splits a stat line after the command name: field N of
// proc_pid_stat(5) is the result's [N-3]. The command name sits between
// the first '(' and the last ')' — a thread may name itself "a) R 1 (b",
// and no field after the name holds a ')' — so fields are counted from the
// last ')'. It checks no field count; ParseStat does.
func StatFields(line []byte) ([]string, error) {
	_, _, rest, err := splitStat(line)
	return rest, err
}

// splitStat finds the parentheses around the command name and splits the
// fields after it.
func splitStat(line []byte) (open, end int, rest []string, err error) {
	open = bytes.IndexByte(line, '(')
	end = bytes.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return 0, 0, nil, errors.New("stat line has no (comm)")
	}
	return open, end, strings.Fields(string(line[end+1:])), nil
}

// ParseStat parses a stat line (with or without its newline). It needs the
// fields up to 41 (the policy) and every one it keeps to be a number
// that fits its type.
func ParseStat(line []byte) (Stat, error) {
	open, end, rest, err := splitStat(line)
	if err != nil {
		return Stat{}, err
	}
	if len(rest)+2 < statFieldsWanted {
		return Stat{}, fmt.Errorf("stat line has %d fields, want at least %d", len(rest)+2, statFieldsWanted)
	}
	var st Stat
	if st.PID, err = strconv.Atoi(string(bytes.TrimSpace(line[:open]))); err != nil {
		return Stat{}, fmt.Errorf("stat pid: %w", err)
	}
	st.Comm = string(line[open+1 : end])
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("stat state %q: want one letter", rest[0])
	}
	st.State = rest[0][0]
	field := func(n int) string { return rest[n-3] }
	for _, f := range []struct {
		n   int
		dst *uint64
	}{{14, &st.Utime}, {15, &st.Stime}, {22, &st.StartTime}} {
		if *f.dst, err = strconv.ParseUint(field(f.n), 10, 64); err != nil {
			return Stat{}, fmt.Errorf("stat field %d: %w", f.n, err)
		}
	}
	for _, f := range []struct {
		n   int
		dst *int
	}{{4, &st.PPID}, {19, &st.Nice}, {39, &st.Processor}, {40, &st.RTPriority}, {41, &st.Policy}} {
		if *f.dst, err = strconv.Atoi(field(f.n)); err != nil {
			return Stat{}, fmt.Errorf("stat field %d: %w", f.n, err)
		}
	}
	return st, nil
}

// Schedstat is a task's schedstat line: three counters the scheduler keeps
// when the kernel has CONFIG_SCHED_INFO.
type Schedstat struct {
	RunNs      uint64 // time spent on a CPU
	WaitNs     uint64 // time spent runnable, waiting for a CPU
	Timeslices uint64 // times it was switched in
}

// ParseSchedstat parses a schedstat line: "run wait timeslices".
func ParseSchedstat(line []byte) (Schedstat, error) {
	f := strings.Fields(string(line))
	if len(f) < 3 {
		return Schedstat{}, fmt.Errorf("schedstat line has %d fields, want 3", len(f))
	}
	var s Schedstat
	var err error
	for i, dst := range []*uint64{&s.RunNs, &s.WaitNs, &s.Timeslices} {
		if *dst, err = strconv.ParseUint(f[i], 10, 64); err != nil {
			return Schedstat{}, fmt.Errorf("schedstat field %d: %w", i+1, err)
		}
	}
	return s, nil
}
