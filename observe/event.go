package observe

import "fmt"

// Kind says which kernel event an Event carries.
type Kind uint8

// The event kinds. Each comment says how the Event's fields are used; fields not
// named are zero.
const (
	_ Kind = iota
	// KindSwitch is sched_switch: PrevTid/PrevComm/PrevPrio/PrevState leave the
	// CPU, Tid/Comm/Prio take it.
	KindSwitch
	// KindWaking is sched_waking: Pid (the task current on CPU, i.e. the waker,
	// or the task an interrupt arrived on) makes Tid runnable, to run on TargetCPU.
	KindWaking
	// KindWakeup is sched_wakeup, the older, later-firing twin of sched_waking.
	KindWakeup
	// KindWakeupNew is sched_wakeup_new: a newly created Tid is made runnable by Pid.
	KindWakeupNew
	// KindNewTask is task_newtask: Pid created Tid named Comm with CloneFlags.
	// Pid is -1 when the creator is not known.
	KindNewTask
	// KindFork is sched_process_fork: PrevTid/PrevComm (the parent) forked Tid/Comm.
	KindFork
	// KindRename is task_rename: Tid changed its comm from PrevComm to Comm.
	KindRename
	// KindExit is sched_process_exit: Tid (comm Comm, prio Prio) exits; Tgid when known.
	KindExit
	// KindFree is sched_process_free: the kernel released Tid's task struct.
	KindFree
	// KindBlockedReason is sched_blocked_reason: why Tid last blocked in D; IOWait.
	KindBlockedReason
	// KindThreadInfo states a thread's identity outside the event stream
	// (Perfetto ProcessTree, the ftrace text "(tgid)" column): Tid, Tgid, Comm.
	KindThreadInfo
	// KindProcessInfo states a process's identity: Tid is the pid, PrevTid the
	// parent pid, Args the command line; Comm the process name, carried only
	// when there is no command line (kernel threads, zombies).
	KindProcessInfo
	numKinds
)

var kindNames = [...]string{
	KindSwitch:        "sched_switch",
	KindWaking:        "sched_waking",
	KindWakeup:        "sched_wakeup",
	KindWakeupNew:     "sched_wakeup_new",
	KindNewTask:       "task_newtask",
	KindFork:          "sched_process_fork",
	KindRename:        "task_rename",
	KindExit:          "sched_process_exit",
	KindFree:          "sched_process_free",
	KindBlockedReason: "sched_blocked_reason",
	KindThreadInfo:    "thread_info",
	KindProcessInfo:   "process_info",
}

// IRQContext says in which interrupt context an event fired.
type IRQContext uint8

// Interrupt contexts.
const (
	IRQNone IRQContext = iota
	IRQSoft            // softirq (e.g. network receive, timers)
	IRQHard            // hardware interrupt
)

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one scheduling event. It is a flat value (no pointers besides
// strings) so readers can fill a caller's Event without allocating.
type Event struct {
	TS   int64 // nanoseconds on the trace clock
	Kind Kind
	CPU  int32 // CPU the event was recorded on; -1 when not tied to a CPU
	// Pid is the task current on CPU when the event fired (ftrace's common_pid):
	// the waker of a waking, the creator of a new task. -1 when unknown.
	Pid int32

	// Tid is the task the event is about (see Kind), with its comm and priority.
	Tid  int32
	Tgid int32 // thread-group id of Tid when the event carries it, else 0
	Comm string
	Prio int32

	// The outgoing task of a switch; the parent of a fork; the old comm of a rename.
	PrevTid   int32
	PrevComm  string
	PrevPrio  int32
	PrevState TaskState

	// IRQ says whether the event fired in interrupt context: for a waking, the
	// wakee was woken by an interrupt (network, timer, disk) that happened to
	// land on Pid, not by Pid itself.
	IRQ IRQContext

	TargetCPU  int32    // wakings: the CPU the wakee will run on
	CloneFlags uint64   // task_newtask
	IOWait     bool     // sched_blocked_reason
	Args       []string // KindProcessInfo: the command line
}

func (e *Event) String() string {
	switch e.Kind {
	case KindSwitch:
		return fmt.Sprintf("%d cpu%d %s: %s/%d [%s] ==> %s/%d", e.TS, e.CPU, e.Kind,
			e.PrevComm, e.PrevTid, e.PrevState, e.Comm, e.Tid)
	case KindWaking, KindWakeup, KindWakeupNew:
		return fmt.Sprintf("%d cpu%d %s: %s/%d by %d on cpu%d", e.TS, e.CPU, e.Kind,
			e.Comm, e.Tid, e.Pid, e.TargetCPU)
	default:
		return fmt.Sprintf("%d cpu%d %s: %s/%d (pid %d)", e.TS, e.CPU, e.Kind, e.Comm, e.Tid, e.Pid)
	}
}
