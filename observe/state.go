package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// TaskState is a thread's scheduling state, as sched_switch reports prev_state
// and as thread-state rows carry it. The bits are the kernel's task-report
// layout since Linux 4.14 (the one every supported node runs); states only older
// kernels report sit above it. StateRunning never appears in prev_state: it marks
// the rows where the thread was on a CPU.
type TaskState uint16

// Task states. StateRunnable is the zero value: "R".
const (
	StateRunnable        TaskState = 0
	StateSleeping        TaskState = 0x1    // S: interruptible sleep
	StateUninterruptible TaskState = 0x2    // D: uninterruptible sleep (usually I/O)
	StateStopped         TaskState = 0x4    // T
	StateTraced          TaskState = 0x8    // t
	StateExitDead        TaskState = 0x10   // X
	StateZombie          TaskState = 0x20   // Z
	StateParked          TaskState = 0x40   // P
	StateIdle            TaskState = 0x80   // I: idle kernel thread sleeping
	StatePreempted       TaskState = 0x100  // "+": switched out while runnable (R+)
	StateWakeKill        TaskState = 0x200  // K (kernels before 4.14)
	StateWaking          TaskState = 0x400  // W (kernels before 4.14)
	StateNoLoad          TaskState = 0x800  // N (kernels before 4.14)
	StateTaskDead        TaskState = 0x1000 // x (kernels before 4.14)
	StateInvalid         TaskState = 0x4000 // bits the kernel's layout does not define
	StateRunning         TaskState = 0x8000 // on a CPU; a row state, never a prev_state
)

// stateLetters lists the report letters in the order ftrace prints them.
var stateLetters = [...]struct {
	bit    TaskState
	letter byte
}{
	{StateSleeping, 'S'}, {StateUninterruptible, 'D'}, {StateStopped, 'T'},
	{StateTraced, 't'}, {StateExitDead, 'X'}, {StateZombie, 'Z'},
	{StateParked, 'P'}, {StateIdle, 'I'}, {StateWakeKill, 'K'},
	{StateWaking, 'W'}, {StateNoLoad, 'N'}, {StateTaskDead, 'x'},
}

// Runnable reports whether the state is R or R+: the thread wants a CPU.
func (s TaskState) Runnable() bool { return s&^StatePreempted == StateRunnable }

// String gives trace_processor's spelling: "Running", "R", "R+", "S", "D",
// "DK", ... (letters of a combined state are written together, as
// trace_processor does, but never truncated).
func (s TaskState) String() string {
	switch s {
	case StateRunning:
		return "Running"
	case StateInvalid:
		return "?"
	}
	base := s &^ StatePreempted
	if base == 0 {
		if s&StatePreempted != 0 {
			return "R+"
		}
		return "R"
	}
	var b strings.Builder
	for _, l := range stateLetters {
		if base&l.bit != 0 {
			b.WriteByte(l.letter)
		}
	}
	if s&StatePreempted != 0 {
		b.WriteByte('+')
	}
	if b.Len() == 0 {
		return "0x" + strconv.FormatUint(uint64(s), 16)
	}
	return b.String()
}

// ParseTaskState reads ftrace's text form of prev_state ("R", "R+", "S", "D|K",
// "I", "X", ...) and String's form ("DK"). It returns an error for letters it
// does not know.
func ParseTaskState(s string) (TaskState, error) {
	if s == "" {
		return 0, fmt.Errorf("empty task state")
	}
	var st TaskState
	if strings.HasSuffix(s, "+") {
		st |= StatePreempted
		s = s[:len(s)-1]
	}
	if s == "R" {
		return st, nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '|' {
			continue
		}
		found := false
		for _, l := range stateLetters {
			if l.letter == c {
				st |= l.bit
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown task state %q", s)
		}
	}
	if st&^StatePreempted == 0 {
		return 0, fmt.Errorf("unknown task state %q", s)
	}
	return st, nil
}
