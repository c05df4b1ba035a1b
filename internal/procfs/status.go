package procfs

import (
	"fmt"
	"strconv"
	"strings"
)

// StatusKey names the lines of a status file that ParseStatus reads; a
// Status records which it saw, and Require checks for them. Keys combine
// with |.
type StatusKey uint8

// The status lines ParseStatus reads.
const (
	StatusTgid StatusKey = 1 << iota
	StatusCPUsAllowedList
	StatusVoluntaryCtxtSwitches
	StatusNonvoluntaryCtxtSwitches
	StatusCapEff
)

// statusKeys are the status file's names for the keys, in file order.
var statusKeys = []struct {
	key  StatusKey
	name string
}{
	{StatusTgid, "Tgid"},
	{StatusCapEff, "CapEff"},
	{StatusCPUsAllowedList, "Cpus_allowed_list"},
	{StatusVoluntaryCtxtSwitches, "voluntary_ctxt_switches"},
	{StatusNonvoluntaryCtxtSwitches, "nonvoluntary_ctxt_switches"},
}

// Status is what this module reads from a process's or thread's status
// file (proc_pid_status(5)).
type Status struct {
	Tgid int // the process a thread belongs to
	// CPUsAllowedList is the affinity as the kernel writes it: "0-3,8".
	CPUsAllowedList          string
	VoluntaryCtxtSwitches    uint64
	NonvoluntaryCtxtSwitches uint64
	CapEff                   uint64 // the effective capability set, a bit per capability
	// Present says which of the lines above the file had: a kernel may
	// lack some, and a zero is a valid value for each.
	Present StatusKey
}

// ParseStatus parses a status file ("Key:\tvalue" lines). Lines it does
// not read are skipped, so is a line without a colon; a line it reads
// whose value is malformed is an error.
func ParseStatus(data []byte) (Status, error) {
	var st Status
	for line := range strings.SplitSeq(string(data), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		var key StatusKey
		var err error
		switch name {
		case "Tgid":
			key = StatusTgid
			st.Tgid, err = strconv.Atoi(val)
		case "Cpus_allowed_list":
			key = StatusCPUsAllowedList
			st.CPUsAllowedList = val
		case "voluntary_ctxt_switches":
			key = StatusVoluntaryCtxtSwitches
			st.VoluntaryCtxtSwitches, err = strconv.ParseUint(val, 10, 64)
		case "nonvoluntary_ctxt_switches":
			key = StatusNonvoluntaryCtxtSwitches
			st.NonvoluntaryCtxtSwitches, err = strconv.ParseUint(val, 10, 64)
		case "CapEff":
			key = StatusCapEff
			st.CapEff, err = strconv.ParseUint(val, 16, 64)
		default:
			continue
		}
		if err != nil {
			return Status{}, fmt.Errorf("status %s: %w", name, err)
		}
		st.Present |= key
	}
	return st, nil
}

// Require returns an error naming the lines of keys the file lacked, nil
// when it had them all.
func (s Status) Require(keys StatusKey) error {
	var missing []string
	for _, k := range statusKeys {
		if keys&k.key != 0 && s.Present&k.key == 0 {
			missing = append(missing, k.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("status has no %s line", strings.Join(missing, ", "))
	}
	return nil
}
