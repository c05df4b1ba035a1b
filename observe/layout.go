package observe

import (
	"strconv"
	"strings"
)

// The kernel changed the bit layout of sched_switch's prev_state in 4.14 (and
// moved the preemption marker in 4.8). A Perfetto trace carries the raw bits
// and, in SystemInfo, the kernel release to decode them with. Like
// trace_processor, a trace that does not say which kernel it came from is
// decoded with the 4.4 layout.

type stateLayout struct {
	legacy    bool  // before 4.14
	preempted int64 // the bit marking "switched out while runnable"
	bits      [16]TaskState
}

var (
	layoutModern = stateLayout{preempted: 0x100, bits: [16]TaskState{
		StateSleeping, StateUninterruptible, StateStopped, StateTraced,
		StateExitDead, StateZombie, StateParked, StateIdle,
	}}
	layoutLegacy = stateLayout{legacy: true, preempted: 0x1000, bits: [16]TaskState{
		StateSleeping, StateUninterruptible, StateStopped, StateTraced,
		StateExitDead, StateZombie, StateTaskDead, StateWakeKill,
		StateWaking, StateParked, StateNoLoad,
	}}
	layoutPre48 = func() stateLayout { l := layoutLegacy; l.preempted = 0x800; return l }()
)

// layoutFor picks the prev_state layout for a kernel release ("6.18.4-amd64").
func layoutFor(release string) *stateLayout {
	major, minor, ok := ParseKernelRelease(release)
	switch {
	case !ok:
		return &layoutPre48 // trace_processor assumes 4.4
	case major > 4 || (major == 4 && minor >= 14):
		return &layoutModern
	case major == 4 && minor >= 8:
		return &layoutLegacy
	default:
		return &layoutPre48
	}
}

// ParseKernelRelease reads the major and minor version of a kernel release
// ("6.18.4-amd64": 6, 18); ok is false when the release does not start with
// them.
func ParseKernelRelease(release string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(release, ".")
	if !found {
		return 0, 0, false
	}
	b, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ma, mi, true
}

// decode turns raw prev_state bits into a TaskState. Bits the layout does not
// define make the state StateInvalid.
func (l *stateLayout) decode(raw int64) TaskState {
	var st TaskState
	if raw&l.preempted != 0 {
		st |= StatePreempted
		raw &^= l.preempted
	}
	for i := 0; raw != 0 && i < 64; i++ {
		if raw&1 != 0 {
			if i >= len(l.bits) || l.bits[i] == 0 {
				return StateInvalid
			}
			st |= l.bits[i]
		}
		raw >>= 1
	}
	if l.legacy && st == StateUninterruptible|StateNoLoad {
		st = StateIdle
	}
	return st
}

// encode is decode's inverse. It reports false for a state the layout cannot
// express (an idle state on a pre-4.14 layout is written as D|N, as the kernel did).
func (l *stateLayout) encode(st TaskState) (int64, bool) {
	if st == StateInvalid {
		return 0, false
	}
	var raw int64
	if st&StatePreempted != 0 {
		raw |= l.preempted
		st &^= StatePreempted
	}
	if l.legacy && st&StateIdle != 0 {
		st = st&^StateIdle | StateUninterruptible | StateNoLoad
	}
	for i, b := range l.bits {
		if b != 0 && st&b != 0 {
			raw |= 1 << i
			st &^= b
		}
	}
	return raw, st == 0
}
