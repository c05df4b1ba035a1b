package scx

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// Kfunc compatibility.
//
// sched_ext renamed kfuncs across kernels (scx_bpf_dispatch became
// scx_bpf_dsq_insert in 6.13, and 7.x added scx_bpf_dsq_insert___v2 next to
// it). The BPF program declares every name weak and calls the first one that
// exists (ts_ksym_exists), which is how libbpf-loaded schedulers do it.
//
// cilium/ebpf (v0.21, v0.22) cannot load that as is: kernel BTF lookups go
// through btf.Spec.AnyTypesByName, which buckets names by their "essential"
// part (the name before a ___ suffix) and, filtering the bucket, skips the
// element after each one it deletes. A lookup of scx_bpf_dsq_insert on 7.2
// then returns both scx_bpf_dsq_insert and scx_bpf_dsq_insert___v2_impl and
// the load fails with "multiple matching types", although the program would
// never call it; whether a ___v2 name resolves depends on the order of the
// types in that kernel's BTF.
//
// So before loading, resolveKfuncs asks the library itself, on the running
// kernel's BTF, which of the program's kfunc names it can resolve, and
// hides the others from it: their calls become the same poisoned helper
// call cilium/ebpf emits for a missing weak kfunc, and their existence
// checks load 0, so the verifier prunes those branches as dead code. The
// program then runs the newest name the loader can bind. A family where no
// name resolves is a clear error before load.

// kfuncFamilies lists the kfuncs the scheduler needs, newest name first;
// one name of each family must resolve.
var kfuncFamilies = [][]string{
	{"scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert", "scx_bpf_dispatch"},
	{"scx_bpf_dsq_insert_vtime", "scx_bpf_dispatch_vtime"},
	{"scx_bpf_dsq_move_to_local___v2", "scx_bpf_dsq_move_to_local", "scx_bpf_consume"},
	{"scx_bpf_select_cpu_and", "scx_bpf_select_cpu_dfl"},
	// Moving penned threads out (ceilings): renamed in 6.13.
	{"scx_bpf_dsq_move", "scx_bpf_dispatch_from_dsq"},
	{"scx_bpf_dsq_move_vtime", "scx_bpf_dispatch_vtime_from_dsq"},
	{"scx_bpf_dsq_move_set_slice", "scx_bpf_dispatch_from_dsq_set_slice"},
	{"scx_bpf_dsq_move_set_vtime", "scx_bpf_dispatch_from_dsq_set_vtime"},
}

// poisonedCall is the helper number cilium/ebpf (and libbpf) put in place
// of a call to a weak kfunc that does not exist: never valid, and only ever
// in code the verifier proves dead.
const poisonedCall = 0xdedc0de

// kfuncChoice is the outcome of resolveKfuncs.
type kfuncChoice struct {
	Use  []string          // names of the chosen kfuncs, one per family
	Hide map[string]string // kfunc name → why it is hidden from the loader
}

// resolveKfuncs decides, for every kfunc the programs in spec reference,
// whether the loader can resolve it in kernel, and per family which name
// the program will call. It does not change spec.
func resolveKfuncs(spec *ebpf.CollectionSpec, kernel *btf.Spec) (*kfuncChoice, error) {
	ch := &kfuncChoice{Hide: map[string]string{}}
	usable := map[string]bool{}
	var problems []string
	for _, name := range kfuncNames(spec) {
		var fn *btf.Func
		err := kernel.TypeByName(name, &fn)
		switch {
		case err == nil:
			usable[name] = true
		case errors.Is(err, btf.ErrNotFound):
			ch.Hide[name] = "not in this kernel"
		case errors.Is(err, btf.ErrMultipleMatches):
			ch.Hide[name] = "cilium/ebpf finds several matches in the kernel's BTF (its ___ suffix bucketing bug)"
		default:
			return nil, fmt.Errorf("look up kfunc %s in kernel BTF: %w", name, err)
		}
		if !usable[name] && !inFamily(name) {
			problems = append(problems, fmt.Sprintf("%s: %s", name, ch.Hide[name]))
		}
	}
	for _, fam := range kfuncFamilies {
		chosen := ""
		for _, name := range fam {
			if !usable[name] {
				continue
			}
			if chosen == "" {
				chosen = name
				ch.Use = append(ch.Use, name)
				continue
			}
			ch.Hide[name] = "superseded by " + chosen
		}
		if chosen == "" && referencesAny(spec, fam) {
			var why []string
			for _, name := range fam {
				why = append(why, fmt.Sprintf("%s: %s", name, ch.Hide[name]))
			}
			problems = append(problems, "none of "+strings.Join(why, "; "))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("kernel lacks kfuncs the scheduler needs (%s); sched_ext needs Linux ≥ 6.12: %w",
			strings.Join(problems, "; "), ebpf.ErrNotSupported)
	}
	return ch, nil
}

func inFamily(name string) bool {
	for _, fam := range kfuncFamilies {
		if slices.Contains(fam, name) {
			return true
		}
	}
	return false
}

func referencesAny(spec *ebpf.CollectionSpec, names []string) bool {
	have := kfuncNames(spec)
	for _, n := range names {
		if slices.Contains(have, n) {
			return true
		}
	}
	return false
}

// kfuncNames returns the sorted names of the kfuncs spec's programs call.
func kfuncNames(spec *ebpf.CollectionSpec) []string {
	var names []string
	for _, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if ins.IsKfuncCall() && ins.Reference() != "" && !slices.Contains(names, ins.Reference()) {
				names = append(names, ins.Reference())
			}
		}
	}
	slices.Sort(names)
	return names
}

// hideKfuncs rewrites spec's programs so that the loader never looks up the
// hidden names: calls become poisoned helper calls and address loads (the
// ts_ksym_exists checks) load 0. It returns how many instructions changed.
func hideKfuncs(spec *ebpf.CollectionSpec, hide map[string]string) int {
	n := 0
	for _, p := range spec.Programs {
		for i, ins := range p.Instructions {
			if _, ok := hide[ins.Reference()]; !ok || ins.Reference() == "" {
				continue
			}
			var repl asm.Instruction
			switch {
			case ins.IsKfuncCall():
				repl = asm.BuiltinFunc(poisonedCall).Call()
			case ins.OpCode.IsDWordLoad():
				repl = asm.LoadImm(ins.Dst, 0, asm.DWord)
			default:
				continue
			}
			// Keep what the loader needs from the old instruction: the
			// function symbol (if one starts here) and line info.
			if s := ins.Symbol(); s != "" {
				repl = repl.WithSymbol(s)
			}
			if src := ins.Source(); src != nil {
				repl = repl.WithSource(src)
			}
			p.Instructions[i] = repl
			n++
		}
	}
	return n
}
