package scx

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/internal/need"
)

// The kfuncs every kernel must have for the scheduler (no renames).
var stableKfuncs = []string{
	"scx_bpf_create_dsq", "scx_bpf_kick_cpu", "scx_bpf_test_and_clear_cpu_idle",
	"scx_bpf_pick_idle_cpu", "scx_bpf_task_cpu", "scx_bpf_dsq_nr_queued", "bpf_cpumask_create",
	"bpf_cpumask_release", "bpf_cpumask_set_cpu", "bpf_cpumask_test_cpu", "bpf_cpumask_intersects",
	// The tier's preemptible-CPU mask (6.5 has both).
	"bpf_cpumask_clear_cpu", "bpf_cpumask_any_and_distribute",
	"bpf_iter_scx_dsq_new", "bpf_iter_scx_dsq_next", "bpf_iter_scx_dsq_destroy",
	// The tier's cgroup ancestry (6.12 has them all).
	"scx_bpf_task_cgroup", "bpf_cgroup_ancestor", "bpf_cgroup_release",
}

// The moves out of a ceiling's pen: 6.13 names, and 6.12's.
var (
	moveKfuncs    = []string{"scx_bpf_dsq_move", "scx_bpf_dsq_move_vtime", "scx_bpf_dsq_move_set_slice", "scx_bpf_dsq_move_set_vtime"}
	moveKfuncs612 = []string{"scx_bpf_dispatch_from_dsq", "scx_bpf_dispatch_vtime_from_dsq", "scx_bpf_dispatch_from_dsq_set_slice", "scx_bpf_dispatch_from_dsq_set_vtime"}
)

func TestResolveKfuncs(t *testing.T) {
	spec, err := bpf.LoadScheduler()
	if err != nil {
		t.Fatal(err)
	}
	with := func(names ...string) []string { return append(slices.Concat(stableKfuncs, moveKfuncs), names...) }
	with612 := func(names ...string) []string { return append(slices.Concat(stableKfuncs, moveKfuncs612), names...) }
	tests := []struct {
		name    string
		funcs   []string // kernel BTF functions, in BTF order
		use     []string
		hidden  map[string]string // name → substring of the reason
		wantErr string
	}{
		{
			// The order of Debian sid's 7.2.13: the plain names are
			// ambiguous to cilium/ebpf, the ___v2 ones resolve.
			name: "7.2 with ___v2",
			funcs: with("scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert___v2_impl", "scx_bpf_dsq_insert_impl",
				"scx_bpf_dsq_insert_vtime",
				"scx_bpf_dsq_move_to_local", "scx_bpf_dsq_move_to_local___v2", "scx_bpf_dsq_move_to_local___v2_impl",
				"scx_bpf_select_cpu_and", "scx_bpf_select_cpu_dfl"),
			use: append([]string{"scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local___v2", "scx_bpf_select_cpu_and"}, moveKfuncs...),
			hidden: map[string]string{
				"scx_bpf_dsq_insert":        "several matches",
				"scx_bpf_dsq_move_to_local": "several matches",
				"scx_bpf_dispatch":          "not in this kernel",
				"scx_bpf_select_cpu_dfl":    "superseded by scx_bpf_select_cpu_and",
			},
		},
		{
			name:  "6.13: new names, no ___v2",
			funcs: with("scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_select_cpu_dfl"),
			use:   append([]string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_select_cpu_dfl"}, moveKfuncs...),
			hidden: map[string]string{
				"scx_bpf_dispatch_from_dsq": "not in this kernel",
				"scx_bpf_dsq_insert___v2":   "not in this kernel",
				"scx_bpf_consume":           "not in this kernel",
				"scx_bpf_select_cpu_and":    "not in this kernel",
			},
		},
		{
			name:  "6.12: the first names",
			funcs: with612("scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume", "scx_bpf_select_cpu_dfl"),
			use:   append([]string{"scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume", "scx_bpf_select_cpu_dfl"}, moveKfuncs612...),
		},
		{
			// Another BTF order: now the ___v2 name is the ambiguous one
			// and the plain name resolves.
			name: "other order",
			funcs: with("scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2_impl",
				"scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_select_cpu_dfl"),
			use:    append([]string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_select_cpu_dfl"}, moveKfuncs...),
			hidden: map[string]string{"scx_bpf_dsq_insert___v2": "several matches"},
		},
		{
			// And in this one neither resolves: nothing of that family
			// can be bound, a clear error before loading.
			name: "unlucky order",
			funcs: with("scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert___v2_impl", "scx_bpf_dsq_insert",
				"scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_select_cpu_dfl"),
			wantErr: "none of scx_bpf_dsq_insert___v2: cilium/ebpf finds several matches",
		},
		{
			name:    "no sched_ext kfuncs",
			funcs:   []string{"bpf_cpumask_create"},
			wantErr: "scx_bpf_create_dsq: not in this kernel",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kernel, _ := fakeKernelBTF(t, nil, tt.funcs)()
			ch, err := resolveKfuncs(spec, kernel)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ebpf.ErrNotSupported) {
					t.Fatalf("resolveKfuncs: %v, want ErrNotSupported containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ch.Use, tt.use) {
				t.Errorf("use %v, want %v", ch.Use, tt.use)
			}
			for name, why := range tt.hidden {
				if !strings.Contains(ch.Hide[name], why) {
					t.Errorf("%s hidden as %q, want %q", name, ch.Hide[name], why)
				}
			}
			for _, name := range ch.Use {
				if _, hidden := ch.Hide[name]; hidden {
					t.Errorf("%s both used and hidden", name)
				}
			}
		})
	}
}

// TestResolveKfuncsRealKernel runs the choice against the BTF of the
// cached Debian sid kernel that scripts/vm-kernel.sh --btf extracts (make
// test does; make vmtest proves the same choice by loading it in the VM).
func TestResolveKfuncsRealKernel(t *testing.T) {
	cache := os.Getenv("TEMPER_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "temper-train")
	}
	files, _ := filepath.Glob(filepath.Join(cache, "kernel", "*", "vmlinux.btf"))
	if len(files) == 0 {
		need.Unmet(t, "the cached sid kernel's BTF ("+filepath.Join(cache, "kernel", "*", "vmlinux.btf")+")", "run scripts/vm-kernel.sh --btf (make test does)")
	}
	spec, err := bpf.LoadScheduler()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		kernel, err := btf.LoadSpec(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ch, err := resolveKfuncs(spec, kernel)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Logf("%s: use %v; hidden %v", f, ch.Use, ch.Hide)
	}
}

func TestHideKfuncs(t *testing.T) {
	spec, err := bpf.LoadScheduler()
	if err != nil {
		t.Fatal(err)
	}
	names := kfuncNames(spec)
	for _, fam := range kfuncFamilies {
		for _, n := range fam {
			if !slices.Contains(names, n) {
				t.Errorf("the program does not reference %s of its family %v", n, fam)
			}
		}
	}
	hide := map[string]string{"scx_bpf_dsq_insert": "test", "scx_bpf_dsq_move_to_local": "test"}
	before := references(spec)
	n := hideKfuncs(spec, hide)
	after := references(spec)
	for name := range hide {
		if before[name] == 0 {
			t.Errorf("%s was not referenced before", name)
		}
		if after[name] != 0 {
			t.Errorf("%s still referenced %d times", name, after[name])
		}
	}
	if n != before["scx_bpf_dsq_insert"]+before["scx_bpf_dsq_move_to_local"] {
		t.Errorf("changed %d instructions, want %d", n, before["scx_bpf_dsq_insert"]+before["scx_bpf_dsq_move_to_local"])
	}
	if after["scx_bpf_dsq_insert___v2"] != before["scx_bpf_dsq_insert___v2"] {
		t.Errorf("a name not hidden changed")
	}
	poisoned := 0
	for _, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if ins.IsBuiltinCall() && ins.Constant == poisonedCall {
				poisoned++
			}
		}
		// Every program still starts with its symbol.
		if p.Instructions[0].Symbol() != p.Name {
			t.Errorf("program %s starts with symbol %q", p.Name, p.Instructions[0].Symbol())
		}
	}
	if poisoned == 0 {
		t.Error("no poisoned call left where the hidden kfuncs were called")
	}
}

// references counts the instructions referring to each symbol.
func references(spec *ebpf.CollectionSpec) map[string]int {
	m := map[string]int{}
	for _, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if r := ins.Reference(); r != "" {
				m[r]++
			}
		}
	}
	return m
}
