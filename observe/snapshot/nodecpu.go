package snapshot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"temper.codes/temper-train/internal/procfs"
)

// NodeCPU is the node's aggregate CPU time (/proc/stat's "cpu" line) at
// both ends of the trace: what every task on the node used, the workload's
// and everyone else's, which the trace (filtered to the target, or lossy)
// cannot always say. Synthesize sizes exclusive cores against it.
type NodeCPU struct {
	Begin *CPUTimes `json:"begin"`
	End   *CPUTimes `json:"end"`
}

// CPUTimes are /proc/stat's aggregate counters in clock ticks (USER_HZ),
// summed over all CPUs. Guest time is already in User and Nice.
type CPUTimes struct {
	User    int64 `json:"user"`
	Nice    int64 `json:"nice"`
	System  int64 `json:"system"`
	Idle    int64 `json:"idle"`
	IOWait  int64 `json:"iowait"`
	IRQ     int64 `json:"irq"`
	SoftIRQ int64 `json:"softirq"`
	Steal   int64 `json:"steal"`
}

// busy is the time some task or interrupt ran; total adds idle, iowait
// and steal (time the hypervisor ran someone else).
func (t CPUTimes) busy() int64  { return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ }
func (t CPUTimes) total() int64 { return t.busy() + t.Idle + t.IOWait + t.Steal }

// BusyCPUs is the node's CPU use between the two halves in CPUs (1 = one
// CPU busy all the time), given its logical CPU count; false when a half is
// missing or the counters did not move.
func (n *NodeCPU) BusyCPUs(logical int) (float64, bool) {
	if n == nil || n.Begin == nil || n.End == nil || logical <= 0 {
		return 0, false
	}
	busy, total := n.End.busy()-n.Begin.busy(), n.End.total()-n.Begin.total()
	if total <= 0 || busy < 0 || busy > total {
		return 0, false
	}
	return float64(logical) * float64(busy) / float64(total), true
}

// readCPUTimes reads the aggregate line of a /proc/stat file.
func readCPUTimes(path string) (*CPUTimes, error) {
	line, err := procfs.FirstLine(path)
	if err != nil {
		return nil, err
	}
	return parseCPUTimes(line)
}

// parseCPUTimes parses "cpu  user nice system idle iowait irq softirq
// steal ...": kernels before 2.6.11 stop earlier, and the missing fields
// are zero.
func parseCPUTimes(line string) (*CPUTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return nil, errors.New("/proc/stat: first line is not the aggregate cpu line")
	}
	var v [8]int64
	for i := range v {
		if 1+i >= len(f) {
			break
		}
		n, err := strconv.ParseInt(f[1+i], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("/proc/stat: cpu field %d %q is not a tick count", i+1, f[1+i])
		}
		v[i] = n
	}
	return &CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}
