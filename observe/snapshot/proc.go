package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/machine"
)

// ThreadState is what /proc said about one thread at one moment.
//
// Counters are cumulative since the thread started, so the interesting numbers
// are the differences between a thread's Begin and End (see Thread.Delta).
type ThreadState struct {
	Comm  string `json:"comm"`
	State string `json:"state"` // one letter: R, S, D, T, t, X, Z, P, I
	CPU   int    `json:"cpu"`   // CPU the thread last ran on (stat field 39)

	// CPUsAllowedList is Cpus_allowed_list from status as the kernel wrote it
	// ("0-3,8"); CPUsAllowed is the same set expanded.
	CPUsAllowedList string `json:"cpus_allowed_list"`
	CPUsAllowed     []int  `json:"cpus_allowed"`

	Policy     string `json:"policy"`     // SCHED_OTHER, SCHED_FIFO, ..., SCHED_EXT
	PolicyNum  int    `json:"policy_num"` // stat field 41 as the kernel numbers it
	Nice       int    `json:"nice"`       // stat field 19
	RTPriority int    `json:"rt_priority"`

	VoluntaryCtxtSwitches    int64 `json:"voluntary_ctxt_switches"`
	NonvoluntaryCtxtSwitches int64 `json:"nonvoluntary_ctxt_switches"`
	UtimeNs                  int64 `json:"utime_ns"` // user CPU time; clock-tick resolution
	StimeNs                  int64 `json:"stime_ns"` // system CPU time; clock-tick resolution

	Cgroup ThreadCgroup `json:"cgroup"`

	// Cmdline is the process's command line at that moment (arguments
	// joined by spaces). Processes that share one name tell their roles
	// apart here: PostgreSQL's process titles ("postgres: walwriter"),
	// Redis's forked children ("redis-aof-rewrite"). Empty for kernel
	// threads and exiting processes.
	Cmdline string `json:"cmdline,omitempty"`
}

// ThreadCgroup is a thread's place in the cgroup hierarchies, as
// /proc/<pid>/task/<tid>/cgroup reports it (paths relative to the hierarchy
// root, not to a mount point). An empty field means that hierarchy is not
// mounted or the thread's line for it was absent.
type ThreadCgroup struct {
	V2    string `json:"v2,omitempty"`     // the "0::" line
	V1CPU string `json:"v1_cpu,omitempty"` // the v1 hierarchy holding the cpu controller
}

// threadCgroup is the snapshot's view of a thread's cgroups.
func threadCgroup(c procfs.Cgroups) ThreadCgroup {
	return ThreadCgroup{V2: c.V2, V1CPU: c.V1["cpu"]}
}

// procReader reads threads from a proc file system. ticks is the kernel's
// USER_HZ, the unit of utime, stime and starttime.
type procReader struct {
	proc  string // "/proc" on a live system
	ticks int64
}

// threadRecord is a thread as read once: its identity and its state.
type threadRecord struct {
	Tid, Tgid  int
	StartTicks int64
	State      ThreadState
}

// errGone marks a process or thread that exited while it was being read.
var errGone = errors.New("exited")

// threadStatus are the status lines every thread must have: a kernel that
// lacks one is too old to trust the rest.
const threadStatus = procfs.StatusCPUsAllowedList | procfs.StatusVoluntaryCtxtSwitches | procfs.StatusNonvoluntaryCtxtSwitches

// maxCmdline bounds the command line kept per process: a process title fits,
// and long argument lists (which may hold things not meant for a file shared
// with the trace) are cut.
const maxCmdline = 256

// readProcess reads every thread of process tgid. A thread that exits while
// the directory is walked is left out; a process that is gone yields errGone.
func (p procReader) readProcess(tgid int) ([]threadRecord, error) {
	proc := procfs.New(p.proc)
	st, err := proc.Status(tgid)
	if err == nil {
		if err = st.Require(procfs.StatusTgid); err != nil {
			err = fmt.Errorf("read %s: %w", proc.Path(tgid, "status"), err)
		}
	}
	if procfs.IsGone(err) {
		return nil, fmt.Errorf("process %d: %w", tgid, errGone)
	}
	if err != nil {
		return nil, err
	}
	if st.Tgid != tgid {
		return nil, fmt.Errorf("%d is a thread of process %d, not a process", tgid, st.Tgid)
	}
	tids, err := proc.Tasks(tgid)
	if procfs.IsGone(err) {
		return nil, fmt.Errorf("process %d: %w", tgid, errGone)
	}
	if err != nil {
		return nil, err
	}
	// A process that exits now still has threads to report; its cmdline
	// is then empty, as the kernel gives it.
	cmdline, _ := proc.Cmdline(tgid)
	title := cmdline.String()
	if len(title) > maxCmdline {
		title = strings.ToValidUTF8(title[:maxCmdline], "")
	}
	var out []threadRecord
	for _, tid := range tids {
		rec, err := p.readThread(proc, tgid, tid)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec.State.Cmdline = title
		out = append(out, rec)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d: %w", tgid, errGone)
	}
	return out, nil
}

// readThread reads one /proc/<tgid>/task/<tid> directory.
func (p procReader) readThread(proc procfs.FS, tgid, tid int) (threadRecord, error) {
	stat, err := proc.TaskStat(tgid, tid)
	if err != nil {
		return threadRecord{}, gone(err)
	}
	status, err := proc.TaskStatus(tgid, tid)
	if err == nil {
		if err = status.Require(threadStatus); err != nil {
			err = fmt.Errorf("read %s: %w", proc.TaskPath(tgid, tid, "status"), err)
		}
	}
	if err != nil {
		return threadRecord{}, gone(err)
	}
	cg, err := proc.TaskCgroup(tgid, tid)
	if err != nil {
		return threadRecord{}, gone(err)
	}
	cpus, err := machine.ParseCPUList(status.CPUsAllowedList)
	if err != nil {
		return threadRecord{}, fmt.Errorf("read %s: Cpus_allowed_list: %w", proc.TaskPath(tgid, tid, "status"), err)
	}
	return threadRecord{
		Tid:        tid,
		Tgid:       tgid,
		StartTicks: int64(stat.StartTime),
		State: ThreadState{
			Comm:                     stat.Comm,
			State:                    string(stat.State),
			CPU:                      stat.Processor,
			CPUsAllowedList:          status.CPUsAllowedList,
			CPUsAllowed:              cpus,
			Policy:                   machine.PolicyName(stat.Policy),
			PolicyNum:                stat.Policy,
			Nice:                     stat.Nice,
			RTPriority:               stat.RTPriority,
			VoluntaryCtxtSwitches:    int64(status.VoluntaryCtxtSwitches),
			NonvoluntaryCtxtSwitches: int64(status.NonvoluntaryCtxtSwitches),
			UtimeNs:                  ticksToNs(int64(stat.Utime), p.ticks),
			StimeNs:                  ticksToNs(int64(stat.Stime), p.ticks),
			Cgroup:                   threadCgroup(cg),
		},
	}, nil
}

// gone turns the error of a thread that exited into errGone.
func gone(err error) error {
	if procfs.IsGone(err) {
		return errGone
	}
	return err
}

// ticksToNs converts clock ticks to nanoseconds without overflowing for any
// realistic tick count.
func ticksToNs(ticks, hz int64) int64 {
	if hz <= 0 {
		return 0
	}
	return ticks/hz*1e9 + ticks%hz*1e9/hz
}

// defaultClockTicks is USER_HZ on every Linux architecture in use.
const defaultClockTicks = 100

// atClkTck is the auxiliary vector entry holding the clock tick rate.
const atClkTck = 17

// clockTicks returns USER_HZ as the kernel handed it to this process in the
// auxiliary vector, the way sysconf(_SC_CLK_TCK) does, or 100 if it cannot
// be read. auxv is a sequence of (type, value) pairs of native words.
func clockTicks(auxv []byte) int64 {
	const word = strconv.IntSize / 8
	r := bytes.NewReader(auxv)
	for {
		var typ, val uint64
		if word == 8 {
			if binary.Read(r, binary.NativeEndian, &typ) != nil || binary.Read(r, binary.NativeEndian, &val) != nil {
				break
			}
		} else {
			var t, v uint32
			if binary.Read(r, binary.NativeEndian, &t) != nil || binary.Read(r, binary.NativeEndian, &v) != nil {
				break
			}
			typ, val = uint64(t), uint64(v)
		}
		if typ == 0 {
			break
		}
		if typ == atClkTck && val > 0 && val < 1e6 {
			return int64(val)
		}
	}
	return defaultClockTicks
}
