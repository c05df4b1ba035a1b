// Package target resolves the workload every stage acts on — observe traces
// it, apply, refine and canary change how its threads are scheduled: a
// process and its descendants, a cgroup, a command started for the run, or a
// Kubernetes pod (or one of its containers) running on this node, resolved
// into its thread-group ids (tgids).
//
// A target is resolved once (Resolve) and then refreshed while the trace runs
// (Target.Refresh): processes fork and exit, and only the current set of
// tgids tells the tracer which events belong to the workload. Pod targets
// also carry the pod's metadata (snapshot.Pod) as the API server reported it,
// so later stages need not ask the cluster again.
//
// Everything is read from the live system: /proc for process trees, the
// cgroup v1 and v2 filesystems (found in /proc/self/mountinfo) for cgroups,
// and the Kubernetes API server (client-go) for pods. Nothing is cached
// between Resolve calls.
package target

import (
	"temper.codes/temper-train/internal/cgroup"

	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"temper.codes/temper-train/observe/snapshot"
)

// Kind says what a Target was resolved from.
type Kind string

// The kinds of target, one per way of naming it in a Spec.
const (
	KindPid     Kind = "pid"     // Spec.Pid: a process and its descendants
	KindCgroup  Kind = "cgroup"  // Spec.Cgroup: a cgroup and its descendant cgroups
	KindCommand Kind = "command" // Spec.Command: a command started by Resolve
	KindPod     Kind = "pod"     // Spec.Pod: a pod's (or container's) cgroup
)

// Spec names what to trace. Exactly one of Pid, Cgroup, Command and Pod must
// be set; the other fields refine that choice.
type Spec struct {
	// Pid is a process id. The target is the process (all its threads) and
	// every process descended from it, including those started during the
	// trace. A thread id is accepted and means its process.
	Pid int

	// Cgroup is a cgroup directory: an absolute path in a cgroup filesystem
	// (/sys/fs/cgroup/unified/x, /sys/fs/cgroup/cpu/x), or a path relative to
	// the hierarchy root as /proc/PID/cgroup prints it (x, /x), which is
	// looked up in each of CgroupRoots in turn. The target is every process
	// in that cgroup and its descendant cgroups.
	Cgroup string

	// Command is a command line to start; the target is the started process
	// and its descendants. See Target.Stop and Target.Exited.
	Command []string
	// StartIn is the cgroup Command starts in (the node rig's pod); nil is
	// temper-train's own. A command started there is also killed by the
	// kernel if temper-train dies (PR_SET_PDEATHSIG), so that a run killed
	// with SIGKILL leaves no workload running in a rig nobody owns.
	StartIn *cgroup.Dir
	// Stdout and Stderr receive the command's output; nil means this
	// process's own stdout and stderr. The command's stdin is /dev/null.
	Stdout, Stderr io.Writer

	// Pod is a Kubernetes pod as NAMESPACE/NAME. The target is the pod's
	// cgroup on this node, or the cgroup of Container if that is set.
	Pod string
	// Container narrows a Pod target to one container, by name.
	Container string
	// Kubeconfig is the kubeconfig file for Pod. Empty means $KUBECONFIG,
	// else ~/.kube/config, else the in-cluster service account when running
	// in a pod (KUBERNETES_SERVICE_HOST is set).
	Kubeconfig string
	// NodeName is this node's Kubernetes node name, which the pod must be
	// scheduled to. Empty means the host name in lower case, which is the
	// kubelet's default node name.
	NodeName string

	// CgroupRoots are the directories under which pod cgroups (kubepods.slice/…
	// for the kubelet's systemd cgroup driver, kubepods/… for cgroupfs) and
	// relative Cgroup paths are looked up, in order. Empty means the cgroup2
	// mount, then the cgroup v1 mounts of the cpu controller and of the
	// name=systemd hierarchy, as /proc/self/mountinfo lists them. Set it
	// when the kubelet runs with a --cgroup-root that is not the hierarchy
	// root. Each must be a directory in a cgroup or cgroup2 filesystem.
	CgroupRoots []string
}

// Target is a resolved trace target. The exported fields describe it as it
// was when Resolve returned; Refresh gives the current processes.
type Target struct {
	// Kind says which Spec field the target came from.
	Kind Kind
	// Description names the target for messages and the snapshot, e.g.
	// `pod shop/web container nginx (cgroup /sys/fs/cgroup/…, v2)`.
	Description string
	// Identity names the workload in a way that survives a restart of a
	// started command: Description, but for a command target the command
	// line without its pid. A resumed refine compares it with its ledger's.
	Identity string
	// Pid is the root process of a pid or command target, 0 otherwise.
	Pid int
	// Tgids are the target's processes at resolve time, sorted. Never empty.
	Tgids []int
	// Cgroup is the absolute cgroup directory of a cgroup or pod target, ""
	// for pid and command targets.
	Cgroup string
	// CgroupVersion is 1 or 2 for cgroup and pod targets (the version of
	// the hierarchy Cgroup is in), 0 otherwise.
	CgroupVersion int
	// Pod is the pod's metadata for pod targets, nil otherwise.
	Pod *snapshot.Pod
	// Cmd is the started command of a command target, nil otherwise. Use
	// Stop and Exited rather than waiting on it: Resolve already waits.
	Cmd *exec.Cmd

	mu sync.Mutex
	// tracked maps each tgid of a pid or command target seen so far to its
	// start time, so that descendants keep being followed after their parent
	// exits (they are re-parented away from the tree) and a reused pid is not
	// mistaken for a tracked process.
	tracked map[int]uint64

	// Command targets only: done is closed once the command has exited and
	// been reaped; waitErr is what exec.Cmd.Wait returned.
	done    chan struct{}
	waitErr error
}

// Resolve finds what spec names and returns it as a Target with its current
// processes. ctx bounds the work of resolving (API server requests); a
// started command does not depend on it.
//
// Errors match ErrInvalidSpec, ErrNotFound, ErrNothingMatched, ErrWrongNode,
// ErrForbidden or ErrUnauthorized with errors.Is where one applies.
func Resolve(ctx context.Context, spec Spec) (*Target, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	var t *Target
	var err error
	switch {
	case spec.Pid != 0:
		t, err = resolvePid(spec.Pid)
	case spec.Cgroup != "":
		t, err = resolveCgroup(spec.Cgroup, spec.CgroupRoots)
	case len(spec.Command) > 0:
		t, err = startCommand(spec)
	default:
		t, err = resolvePod(ctx, spec)
	}
	if t != nil && t.Identity == "" {
		t.Identity = t.Description
	}
	return t, err
}

// validate checks that spec names exactly one target and that its fields
// are well-formed.
func (s Spec) validate() error {
	var set []string
	if s.Pid != 0 {
		set = append(set, "pid")
	}
	if s.Cgroup != "" {
		set = append(set, "cgroup")
	}
	if len(s.Command) > 0 {
		set = append(set, "command")
	}
	if s.Pod != "" {
		set = append(set, "pod")
	}
	switch {
	case len(set) == 0:
		return newError(ErrInvalidSpec, nil, "no target: give a pid, a cgroup, a pod or a command to run")
	case len(set) > 1:
		return newError(ErrInvalidSpec, nil, fmt.Sprintf("more than one target (%s): give exactly one", strings.Join(set, ", ")))
	case s.Pid < 0:
		return newError(ErrInvalidSpec, nil, fmt.Sprintf("pid %d: a pid is a positive number", s.Pid))
	case s.Container != "" && s.Pod == "":
		return newError(ErrInvalidSpec, nil, fmt.Sprintf("container %q given without a pod: a container is chosen within a pod", s.Container))
	case len(s.Command) > 0 && s.Command[0] == "":
		return newError(ErrInvalidSpec, nil, "command: empty program name")
	}
	if s.Pod != "" {
		if _, _, err := splitPodName(s.Pod); err != nil {
			return err
		}
	}
	return nil
}

// Refresh returns the target's current processes, sorted: for pid and
// command targets the root process (while it lives) and all processes
// descended from it, including descendants whose parent has exited since
// they were first seen; for cgroup and pod targets the processes in the
// cgroup and all its descendant cgroups. An empty result with a nil error
// means everything exited. Refresh is safe to call from several goroutines.
func (t *Target) Refresh() ([]int, error) {
	switch t.Kind {
	case KindPid, KindCommand:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.refreshTree()
	default:
		tgids, err := cgroupTgids(t.Cgroup)
		if err != nil {
			return nil, fmt.Errorf("refresh %s: %w", t.Description, err)
		}
		return tgids, nil
	}
}

// hostNodeName is the kubelet's default node name: the host name in lower
// case.
func hostNodeName() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name for the node name (pass the node name explicitly): %w", err)
	}
	return strings.ToLower(h), nil
}
