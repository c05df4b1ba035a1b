// Package scx is the sched_ext backend of scheduler: it loads temper's
// layered BPF scheduler (bpf/scheduler.bpf.c) into the kernel through
// struct_ops, tells it which thread belongs to which layer, and detaches it
// on Revert. See docs/scheduler.md.
package scx

import (
	"context"
	"errors"
	"os"

	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/scheduler"
)

// Backend applies plans through a sched_ext scheduler. Its zero value is not
// usable; call New.
type Backend struct {
	sysfs     string                    // /sys/kernel/sched_ext, or a fake tree in tests
	kernelBTF func() (*btf.Spec, error) // the running kernel's BTF
	euid      func() int
}

// New returns the backend for the running kernel.
func New() *Backend {
	return &Backend{sysfs: sysfsRoot, kernelBTF: btf.LoadKernelSpec, euid: os.Geteuid}
}

// Name is the backend's name as profiles.MatcherKinds knows it.
func (b *Backend) Name() string { return "sched_ext" }

var _ scheduler.Backend = (*Backend)(nil)

// Apply puts p in force. (Loader in progress.)
func (b *Backend) Apply(ctx context.Context, p scheduler.Plan) (scheduler.Applied, error) {
	if err := b.Probe(); err != nil {
		return nil, err
	}
	return nil, errors.New("sched_ext backend: apply is not implemented yet")
}
