package analyze

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"temper.codes/temper-train/observe"
)

// Target selection modes, as the report and JSON name them.
const (
	TargetSnapshot = "snapshot" // the snapshot's target.tgids
	TargetPID      = "pid"      // --pid
	TargetProcess  = "process"  // --process
	TargetAll      = "all"      // every user thread in the trace
)

// kernelPrefixes are comm prefixes of kernel threads, for traces that do not
// say who a thread's parent is. They name kernel mechanisms, not programs.
var kernelPrefixes = []string{
	"kworker/", "ksoftirqd/", "migration/", "rcu_", "rcuc/", "rcuog/", "rcuop/", "rcub/",
	"cpuhp/", "idle_inject/", "watchdog/", "watchdogd", "irq/", "kthreadd", "kswapd",
	"kcompactd", "khugepaged", "kdamond", "jbd2/", "kauditd", "oom_reaper", "khungtaskd",
	"kblockd", "ksmd", "writeback", "scsi_eh_", "scsi_tmf_", "kintegrityd", "kdevtmpfs",
	"swapper", "kthrotld", "pool_workqueue_", "nvme-", "xfsaild/", "xfs-", "ext4-rsv-conver",
	"ipv6_addrconf", "mm_percpu_wq", "inet_frag_wq", "kstrp", "zswap", "kmpath", "edac-poller",
	"devfreq_wq", "blkcg_punt_bio", "tpm_dev_wq", "ata_sff", "raid5wq", "dm_bufio",
	"kvfree_rcu", "hwrng", "kpsmoused", "napi/", "vhost-", "krfcommd", "cryptd",
}

// isKernelThread decides whether a thread is a kernel thread, from what a
// trace can say. In order:
//  1. the idle task (tid 0) and kthreadd (tid 2) are;
//  2. a thread whose thread group is known and differs from its tid is not
//     (kernel threads are never threads of a multi-threaded process);
//  3. a process whose parent is known is one exactly when its parent is
//     kthreadd (pid 2);
//  4. a thread seen switching out in state I (TASK_IDLE, which only kernel
//     threads use) is;
//  5. otherwise its comm decides: kernelPrefixes.
//
// An unknown thread group (tgid 0) alone decides nothing: stock traces
// without a process tree leave every tgid unknown.
func isKernelThread(th *observe.Thread, ppid map[int32]int32, sawIdle bool) bool {
	switch {
	case th.Tid == 0 || th.Tid == 2:
		return true
	case th.Tgid != 0 && th.Tgid != th.Tid:
		return false
	}
	if p, ok := ppid[th.Tid]; ok {
		return p == 2
	}
	if sawIdle {
		return true
	}
	for _, p := range kernelPrefixes {
		if strings.HasPrefix(th.Name, p) {
			return true
		}
	}
	return false
}

// procInfo is what the analysis knows about the threads of a trace after
// the stream ended: per UTID, whether it is a kernel thread, its process
// (tgid, or its own tid when the trace never said) and that process's name.
type procInfo struct {
	kernel  []bool
	tgid    []int32         // effective thread group: Tgid, else the tid itself
	pname   []string        // process name: main thread's comm, else command line base
	pcmd    []string        // base of the process's command line, when recorded
	byTgid  map[int32][]int // UTIDs per effective tgid
	unknown []bool          // tgid not known from the trace or snapshot
}

// buildProcInfo resolves processes once the stream has ended. A process's
// name (what --process matches and the report shows) is its main thread's
// comm, else the base of its command line's first word; --process also
// matches that command line base. snapTgid fills thread groups the trace did
// not state from the snapshot's thread list.
func buildProcInfo(c *collector, snapTgid map[int32]int32) *procInfo {
	all := c.threads.All()
	p := &procInfo{
		kernel:  make([]bool, len(all)),
		tgid:    make([]int32, len(all)),
		pname:   make([]string, len(all)),
		pcmd:    make([]string, len(all)),
		unknown: make([]bool, len(all)),
		byTgid:  map[int32][]int{},
	}
	mainName := map[int32]string{}
	cmdline := map[int32]string{}
	for _, th := range all {
		if th.UTID == 0 {
			continue
		}
		g := th.Tgid
		if g == 0 {
			if sg, ok := snapTgid[th.Tid]; ok {
				g = sg
				th.Tgid = sg
			}
		}
		if g == 0 {
			g = th.Tid
			p.unknown[th.UTID] = true
		}
		p.tgid[th.UTID] = g
		if th.Tid == g && th.Name != "" {
			mainName[g] = th.Name
		}
		if len(th.Cmdline) > 0 && th.Cmdline[0] != "" {
			cmdline[g] = path.Base(th.Cmdline[0])
		}
	}
	for _, th := range all {
		u := th.UTID
		if u == 0 {
			p.kernel[0] = true
			continue
		}
		var sawIdle bool
		if u < len(c.acc) {
			sawIdle = c.acc[u].sawIdle
		}
		p.kernel[u] = isKernelThread(th, c.ppid, sawIdle)
		g := p.tgid[u]
		p.pcmd[u] = cmdline[g]
		switch {
		case mainName[g] != "":
			p.pname[u] = mainName[g]
		case cmdline[g] != "":
			p.pname[u] = cmdline[g]
		default:
			p.pname[u] = th.Name
		}
		p.byTgid[g] = append(p.byTgid[g], u)
	}
	return p
}

// matchesProcess reports whether a process called pname is the process the
// user named. Comms are cut to 15
// bytes by the kernel, so a longer name matches its first 15 bytes too.
func matchesProcess(pname, want string) bool {
	if pname == want {
		return true
	}
	if len(want) > 15 && pname == want[:15] {
		return true
	}
	return false
}

// selectTarget returns the UTIDs of the target threads, sorted, and a
// description. tgids are the thread groups named by the snapshot or --pid;
// process the --process name. Forks by target threads inside the trace join
// the target (their children's thread groups with them).
func selectTarget(c *collector, p *procInfo, mode string, tgids []int, process string) ([]int, string, error) {
	all := c.threads.All()
	in := make([]bool, len(all))
	want := map[int32]bool{}
	switch mode {
	case TargetSnapshot, TargetPID:
		for _, g := range tgids {
			want[int32(g)] = true
		}
	case TargetProcess:
		for u := 1; u < len(all); u++ {
			if !p.kernel[u] && (matchesProcess(p.pname[u], process) || p.pcmd[u] == process) {
				want[p.tgid[u]] = true
			}
		}
		if len(want) == 0 {
			return nil, "", fmt.Errorf("no process named %q in the trace (processes seen: %s)", process, processSample(p, all))
		}
	case TargetAll:
	default:
		return nil, "", fmt.Errorf("unknown target mode %q", mode)
	}
	for u := 1; u < len(all); u++ {
		if mode == TargetAll {
			in[u] = !p.kernel[u]
		} else {
			in[u] = want[p.tgid[u]]
		}
	}
	// Follow forks in time order: a child of a target thread is a target,
	// and so is the rest of its thread group.
	forked := 0
	for _, f := range c.forks {
		if f.parent < len(in) && in[f.parent] && f.child < len(in) && !in[f.child] {
			g := p.tgid[f.child]
			for _, u := range p.byTgid[g] {
				if !in[u] {
					in[u] = true
					forked++
				}
			}
			in[f.child] = true
		}
	}
	var out []int
	for u := 1; u < len(all); u++ {
		if in[u] {
			out = append(out, u)
		}
	}
	var missing []string
	if mode == TargetSnapshot || mode == TargetPID {
		for _, g := range tgids {
			if len(p.byTgid[int32(g)]) == 0 {
				missing = append(missing, fmt.Sprint(g))
			}
		}
		if len(missing) == len(tgids) {
			return nil, "", fmt.Errorf("no thread of process %s in the trace", strings.Join(missing, ", "))
		}
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("no target threads in the trace")
	}
	procs := map[int32]bool{}
	for _, u := range out {
		procs[p.tgid[u]] = true
	}
	var desc string
	switch mode {
	case TargetSnapshot:
		desc = fmt.Sprintf("tgids %s from the snapshot", joinInts(tgids))
	case TargetPID:
		desc = fmt.Sprintf("tgids %s from --pid", joinInts(tgids))
	case TargetProcess:
		desc = fmt.Sprintf("processes named %q", process)
	case TargetAll:
		desc = "every user thread in the trace (no snapshot, --pid or --process given; kernel threads excluded)"
	}
	desc += fmt.Sprintf(": %s in %s", plural(len(out), "thread"), plural(len(procs), "process"))
	if forked > 0 {
		desc += fmt.Sprintf(", %d of them forked inside the trace", forked)
	}
	if len(missing) > 0 {
		desc += fmt.Sprintf("; no thread of %s in the trace", strings.Join(missing, ", "))
	}
	return out, desc, nil
}

// processSample lists up to eight process names of the trace, for an error.
func processSample(p *procInfo, all []*observe.Thread) string {
	seen := map[string]bool{}
	var names []string
	for u := 1; u < len(all); u++ {
		if p.kernel[u] || seen[p.pname[u]] || p.pname[u] == "" {
			continue
		}
		seen[p.pname[u]] = true
		names = append(names, p.pname[u])
	}
	slices.Sort(names)
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// plural writes n and the noun, with an English plural.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ParsePids reads thread-group ids as a person lists them: positive
// integers separated by commas. "" is none.
func ParsePids(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: %q is not a process id (want positive integers separated by commas)", s, part)
		}
		out = append(out, n)
	}
	return out, nil
}
