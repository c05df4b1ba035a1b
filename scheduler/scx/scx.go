// Package scx is the sched_ext backend of scheduler: it loads temper's
// layered BPF scheduler (bpf/scheduler.bpf.c) into the kernel through
// struct_ops, tells it which thread belongs to which layer, and detaches it
// on Revert. See docs/scheduler.md.
package scx

import (
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/scheduler"
)

// Backend applies plans through a sched_ext scheduler. Its zero value is not
// usable; call New.
type Backend struct {
	sysfs     string                      // /sys/kernel/sched_ext, or a fake tree in tests
	kernelBTF func() (*btf.Spec, error)   // the running kernel's BTF
	caps      func() (procfs.Caps, error) // this process's capabilities
	// timeout bounds the waits for sched_ext's state after attaching and
	// detaching. Switching every task to the new class takes milliseconds
	// on hardware and seconds under emulation.
	timeout time.Duration
	// editSpec, when set (tests only), changes the prepared object just
	// before it is loaded.
	editSpec func(*ebpf.CollectionSpec) error
	// limits reads the CPU limits above a cgroup (ceiling.go); nil: the
	// cgroup filesystem's, found at Apply.
	limits limitReader

	// NoCeilings leaves cpu.max unenforced, as the kernel does under any
	// sched_ext scheduler: the target's threads run wherever their layers
	// let them, whatever their cgroups' limits (see ceiling.go). For
	// measuring what the ceilings cost or prevent.
	NoCeilings bool

	// BestEffort, when set, puts the tier in force (tier.go): the cgroup
	// directory, in the cpu controller's hierarchy (a node's
	// kubepods/besteffort, the rig's besteffort parent), whose tasks run
	// only on CPUs nothing else wants, with a bounded starvation guard.
	// "": no tier, BestEffort tasks compete as normal ones.
	BestEffort string
}

// New returns the backend for the running kernel.
func New() *Backend {
	return &Backend{sysfs: sysfsRoot, kernelBTF: btf.LoadKernelSpec, caps: procfs.EffectiveCaps, timeout: 30 * time.Second}
}

// Name is the backend's name as profiles.MatcherKinds knows it.
func (b *Backend) Name() string { return "sched_ext" }

var _ scheduler.Backend = (*Backend)(nil)
