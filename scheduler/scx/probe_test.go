package scx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/scheduler"
)

// fakeKernelBTF builds a BTF spec holding the named structs and functions,
// in order, as a stand-in for a kernel's.
func fakeKernelBTF(t *testing.T, structs []string, funcs []string) func() (*btf.Spec, error) {
	t.Helper()
	var types []btf.Type
	for _, s := range structs {
		types = append(types, &btf.Struct{Name: s, Size: 8, Members: []btf.Member{{Name: "x", Type: &btf.Int{Name: "u64", Size: 8}}}})
	}
	proto := &btf.FuncProto{Return: (*btf.Void)(nil)}
	for _, f := range funcs {
		types = append(types, &btf.Func{Name: f, Type: proto, Linkage: btf.GlobalFunc})
	}
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return func() (*btf.Spec, error) { return spec, nil }
}

// fakeSysfs writes a /sys/kernel/sched_ext look-alike.
func fakeSysfs(t *testing.T, state, ops string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sched_ext")
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ops != "" {
		if err := os.WriteFile(filepath.Join(dir, "root", "ops"), []byte(ops+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProbe(t *testing.T) {
	withOps := fakeKernelBTF(t, []string{"sched_ext_ops"}, nil)
	tests := []struct {
		name    string
		sysfs   string
		btf     func() (*btf.Spec, error)
		caps    procfs.Caps
		wantErr string // "" = supported
	}{
		{"ready", fakeSysfs(t, "disabled", ""), withOps, all, ""},
		{"no sysfs dir", filepath.Join(t.TempDir(), "missing"), withOps, all, "CONFIG_SCHED_CLASS_EXT"},
		{"no kernel BTF", fakeSysfs(t, "disabled", ""), func() (*btf.Spec, error) { return nil, errors.New("no /sys/kernel/btf/vmlinux") }, all, "CONFIG_DEBUG_INFO_BTF"},
		{"no sched_ext_ops in BTF", fakeSysfs(t, "disabled", ""), fakeKernelBTF(t, []string{"task_struct"}, nil), all, "struct sched_ext_ops is not in the kernel's BTF"},
		{"another scheduler", fakeSysfs(t, "enabled", "scx_lavd_1.0.4"), withOps, all, "another sched_ext scheduler (scx_lavd_1.0.4) is enabled"},
		{"one being disabled", fakeSysfs(t, "disabling", ""), withOps, all, "(unknown) is disabling"},
		{"not root", fakeSysfs(t, "disabled", ""), withOps, 1 << procfs.CapBPF, "CAP_SYS_ADMIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Backend{sysfs: tt.sysfs, kernelBTF: tt.btf, caps: func() (procfs.Caps, error) { return tt.caps, nil }}
			err := b.Probe()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Probe: %v", err)
				}
				return
			}
			if !errors.Is(err, scheduler.ErrUnsupported) {
				t.Fatalf("Probe: %v, want an error wrapping scheduler.ErrUnsupported", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Probe: %q, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestProbeThisMachine runs the real Probe. On a kernel without sched_ext
// (this project's development machines) it must say so, wrapping
// ErrUnsupported; on one with it, it must pass or name the scheduler in
// the way.
func TestProbeThisMachine(t *testing.T) {
	err := New().Probe()
	if _, statErr := os.Stat(sysfsRoot); statErr != nil {
		if !errors.Is(err, scheduler.ErrUnsupported) || !strings.Contains(err.Error(), "/sys/kernel/sched_ext does not exist") {
			t.Fatalf("Probe without sched_ext: %v", err)
		}
		t.Logf("as expected here: %v", err)
		return
	}
	if err != nil && !errors.Is(err, scheduler.ErrUnsupported) {
		t.Fatalf("Probe: %v does not wrap ErrUnsupported", err)
	}
	t.Logf("Probe: %v", err)
}

// all is a capability set holding every capability.
const all = procfs.Caps(1<<64 - 1)

func TestApplyRefusedWithoutSchedExt(t *testing.T) {
	b := &Backend{sysfs: filepath.Join(t.TempDir(), "missing"), kernelBTF: fakeKernelBTF(t, nil, nil), caps: func() (procfs.Caps, error) { return all, nil }}
	_, err := b.Apply(t.Context(), scheduler.Plan{})
	if !errors.Is(err, scheduler.ErrUnsupported) {
		t.Fatalf("Apply: %v, want ErrUnsupported before anything is loaded", err)
	}
}
