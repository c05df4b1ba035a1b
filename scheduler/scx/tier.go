package scx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/scheduler"
)

// The tier: the scheduler's treatment of BestEffort pods.
//
// With Backend.BestEffort naming a cgroup (a node's kubepods/besteffort,
// the rig's besteffort parent), every task under it that the target does
// not hold runs in a layer of its own below yield: its DSQ is consumed only
// when a shared CPU has nothing else queued, and a task of any other layer
// queued on the shared CPUs preempts a BestEffort task running there. A
// starvation guard serves it anyway, once per second at least and more
// often the more tasks wait, so that none waits more than 10 s (the
// kernel's watchdog ejects a scheduler after 30 s of a runnable task not
// running); the turn the guard gives is not preempted. Under saturation
// BestEffort then gets about one 5 ms slice a second of one CPU, where CFS
// gives an idle entity weight 3 against 1024 (≈0.3% of each contended CPU).
//
// The BPF side finds the tasks by cgroup ancestry (scx_bpf_task_cgroup and
// bpf_cgroup_ancestor, compared with the cgroup's id) on every enqueue and
// run, not from a list the loader writes: a BestEffort pod's threads come
// and go without the loader seeing them, and one spawned between two
// Refreshes would otherwise compete as a normal task for up to 100 ms.

// ErrTierCgroup is wrapped when Backend.BestEffort names no cgroup of the
// cpu controller's hierarchy.
var ErrTierCgroup = errors.New("the BestEffort cgroup is not a cgroup of the cpu controller's hierarchy")

// tierCgroup is the BestEffort cgroup as the BPF side compares it: its id
// (kernfs node id: the directory's inode number) and level (depth below the
// hierarchy's root, which is level 0).
type tierCgroup struct {
	ID    uint64
	Level uint32
}

// findTier resolves dir, a directory of the cgroup hierarchy mounted at
// root, for the BPF side.
func findTier(root, dir string) (tierCgroup, error) {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return tierCgroup{}, fmt.Errorf("%w: %s is not below %s", ErrTierCgroup, dir, root)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return tierCgroup{}, fmt.Errorf("%w: %w", ErrTierCgroup, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return tierCgroup{}, fmt.Errorf("%w: %s is not a directory", ErrTierCgroup, dir)
	}
	return tierCgroup{ID: st.Ino, Level: uint32(len(strings.Split(rel, "/")))}, nil
}

// tier resolves Backend.BestEffort in the cpu controller's hierarchy; nil
// when it is unset.
func (b *Backend) tier() (*tierCgroup, error) {
	if b.BestEffort == "" {
		return nil, nil
	}
	h, err := cgroup.Find()
	if err != nil {
		return nil, fmt.Errorf("sched_ext backend: tier: %w", err)
	}
	tc, err := findTier(h.Root, b.BestEffort)
	if err != nil {
		return nil, fmt.Errorf("sched_ext backend: tier: %w", err)
	}
	// On v2 a task's cpu cgroup is the nearest with the cpu controller: a
	// cgroup whose parent does not enable it for its children is never one.
	if h.Version == 2 {
		ctl, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Clean(b.BestEffort)), "cgroup.subtree_control"))
		if err != nil || !slices.Contains(strings.Fields(string(ctl)), "cpu") {
			return nil, fmt.Errorf("sched_ext backend: tier: %w: its parent does not enable the cpu controller for it", ErrTierCgroup)
		}
	}
	return &tc, nil
}

// WithBestEffort returns a copy of b whose schedulers put the tier in force
// for the cgroup directory dir ("": none).
func (b *Backend) WithBestEffort(dir string) *Backend {
	c := *b
	c.BestEffort = dir
	return &c
}

// Tier says what the tier in force is, for output: "" when there is none.
func (a *Applied) Tier() string {
	if a.cfg.Tier < 0 {
		return ""
	}
	return fmt.Sprintf("BestEffort tier: the tasks under %s run only on CPUs nothing else wants (under saturation a guarded turn at least once a second, none waiting over 10 s)", a.b.BestEffort)
}

// WithTier is WithBestEffort as scheduler.Tiered has it.
func (b *Backend) WithTier(besteffort string) scheduler.Backend { return b.WithBestEffort(besteffort) }

var _ scheduler.Tiered = (*Backend)(nil)
