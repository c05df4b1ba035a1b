package scx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/scheduler"
)

// sysfsRoot is where the kernel reports sched_ext's state.
const sysfsRoot = "/sys/kernel/sched_ext"

// unsupported wraps scheduler.ErrUnsupported with what is missing, so
// callers can test errors.Is(err, scheduler.ErrUnsupported) and users read
// one line that says what to do.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("sched_ext backend: %w: %s", scheduler.ErrUnsupported, fmt.Sprintf(format, args...))
}

// Probe checks, without loading anything, that a sched_ext scheduler can be
// attached here: the kernel has sched_ext (its sysfs directory and the
// struct sched_ext_ops type in its BTF, which the loader needs to build the
// struct_ops map), no other sched_ext scheduler is attached (only one can be
// at a time), and we have the privileges to load BPF. Every error wraps
// scheduler.ErrUnsupported and names what is missing.
func (b *Backend) Probe() error {
	if _, err := os.Stat(b.sysfs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return unsupported("%s does not exist: this kernel (%s) was built without CONFIG_SCHED_CLASS_EXT; use a kernel with sched_ext (Linux ≥ 6.12) or the CFS backend", b.sysfs, kernelRelease())
		}
		return unsupported("%v", err)
	}
	spec, err := b.kernelBTF()
	if err != nil {
		return unsupported("kernel BTF: %v (sched_ext needs CONFIG_DEBUG_INFO_BTF=y)", err)
	}
	var ops *btf.Struct
	if err := spec.TypeByName("sched_ext_ops", &ops); err != nil {
		return unsupported("struct sched_ext_ops is not in the kernel's BTF: %v", err)
	}
	state, err := readState(b.sysfs)
	if err != nil {
		return unsupported("%v", err)
	}
	if state != "disabled" {
		name := opsName(b.sysfs)
		return unsupported("another sched_ext scheduler (%s) is %s; detach it first (only one can be attached at a time)", name, state)
	}
	caps, err := b.caps()
	if err != nil {
		return unsupported("%v", err)
	}
	return scheduler.CheckPrivileges(caps, "sched_ext", "loading a sched_ext scheduler", procfs.CapBPF, procfs.CapSysAdmin)
}

// readState returns sched_ext's state: enabling, enabled, disabling or
// disabled.
func readState(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "state"))
	if err != nil {
		return "", fmt.Errorf("read sched_ext state: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// opsName returns the name of the attached scheduler, or "unknown" when the
// kernel does not say.
func opsName(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "root", "ops"))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// kernelRelease is uname -r, for error messages.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown release"
	}
	return strings.TrimSpace(string(b))
}
