package scx

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// smtTopology is cores × 2 hyperthreads, siblings numbered like the test
// VM's (core c = CPUs 2c and 2c+1).
func smtTopology(cores int) *machine.Topology {
	t := &machine.Topology{}
	for c := 0; c < cores; c++ {
		cpus := []int{2 * c, 2*c + 1}
		t.Cores = append(t.Cores, machine.Core{CoreID: c, CPUs: cpus})
		for _, id := range cpus {
			t.CPUs = append(t.CPUs, machine.CPU{ID: id, CoreID: c, Siblings: cpus, Core: c})
		}
	}
	return t
}

func vmtestProfile(t *testing.T) *profiles.Profile {
	t.Helper()
	p, err := profiles.Load("../../testdata/vmtest/profile.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func planFor(t *testing.T, p *profiles.Profile, topo *machine.Topology) scheduler.Plan {
	t.Helper()
	pl, err := scheduler.NewPlan(p, topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestBuildConfigVMProfile(t *testing.T) {
	cfg, err := buildConfig(planFor(t, vmtestProfile(t), smtTopology(2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"compute", "requests", "housekeeping", "rest", scheduler.Unmatched}; !slices.Equal(cfg.Names, want) {
		t.Fatalf("layers %v, want %v", cfg.Names, want)
	}
	wantLayers := []layerConfig{
		{Treatment: tsExclusive, Weight: 100, SliceNs: 20e6, NrCPUs: 1, CPUs: [maxLayerCPUs]uint32{2}},
		{Treatment: tsLatency, Weight: 100, SliceNs: 2e6, Preempt: 1},
		{Treatment: tsYield, Weight: 100, SliceNs: 5e6},
		{Treatment: tsNormal, Weight: 100, SliceNs: 20e6},
		{Treatment: tsNormal, Weight: 100, SliceNs: 20e6},
	}
	if !reflect.DeepEqual(cfg.Layers, wantLayers) {
		t.Errorf("layers\n got %+v\nwant %+v", cfg.Layers, wantLayers)
	}
	// Scheduler.Allocate gives compute the highest core (CPUs 2, 3): CPU 2
	// runs it, CPU 3 stays idle, CPUs 0-1 are shared.
	wantCPUs := []cpuConfig{
		{Owner: noLayer, Siblings: [maxSiblings]uint32{1, noCPU, noCPU}},
		{Owner: noLayer, Siblings: [maxSiblings]uint32{0, noCPU, noCPU}},
		{Owner: 0, Primary: 1, Siblings: [maxSiblings]uint32{3, noCPU, noCPU}},
		{Owner: 0, Siblings: [maxSiblings]uint32{2, noCPU, noCPU}},
	}
	if !reflect.DeepEqual(cfg.CPUs, wantCPUs) {
		t.Errorf("cpus\n got %+v\nwant %+v", cfg.CPUs, wantCPUs)
	}
	// Shared CPUs: latency, then normal (rest and default share it), then yield.
	if want := []uint64{layerDSQBase + 1, normalDSQ, layerDSQBase + 2}; !slices.Equal(cfg.Order, want) {
		t.Errorf("dispatch order %#x, want %#x", cfg.Order, want)
	}
}

func TestBuildConfigSettings(t *testing.T) {
	p := &profiles.Profile{ID: "x", ThreadGroups: []profiles.ThreadGroup{
		{Name: "b", Match: profiles.Match{CommPrefix: []string{"b"}}, Treatment: profiles.Batch, SliceUs: 100000, Weight: 50},
		{Name: "n", Match: profiles.Match{All: true}, Treatment: profiles.Normal, Weight: 300},
	}}
	cfg, err := buildConfig(planFor(t, p, smtTopology(1)))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Layers[0]; l.Treatment != tsNormal || l.SliceNs != 100e6 || l.Weight != 50 || l.Preempt != 0 {
		t.Errorf("batch layer %+v", l)
	}
	if l := cfg.Layers[1]; l.Weight != 300 || l.SliceNs != 20e6 {
		t.Errorf("normal layer %+v", l)
	}
	// The batch layer is served from the normal DSQ, not after it.
	if want := []uint64{normalDSQ}; !slices.Equal(cfg.Order, want) {
		t.Errorf("dispatch order %#x, want %#x", cfg.Order, want)
	}
}

func TestBuildConfigErrors(t *testing.T) {
	excl := profiles.ThreadGroup{Name: "hot", Match: profiles.Match{All: true}, Treatment: profiles.Exclusive, ExclusiveCores: 1}
	tooMany := &profiles.Profile{ID: "many"}
	for i := 0; i < maxLayers; i++ {
		tooMany.ThreadGroups = append(tooMany.ThreadGroups, profiles.ThreadGroup{Name: "g", Match: profiles.Match{All: true}, Treatment: profiles.Normal})
	}
	topo := smtTopology(2)
	tests := []struct {
		name string
		plan scheduler.Plan
		want string
	}{
		{"no profile", scheduler.Plan{Topology: topo}, "no profile"},
		{"no topology", scheduler.Plan{Profile: tooMany}, "no CPU topology"},
		{"too many groups", scheduler.Plan{Profile: tooMany, Topology: topo}, "at most 31"},
		{"exclusive without cores", scheduler.Plan{Profile: &profiles.Profile{ThreadGroups: []profiles.ThreadGroup{excl}}, Topology: topo}, "allocates it no cores"},
		{"half a core", scheduler.Plan{Profile: &profiles.Profile{ThreadGroups: []profiles.ThreadGroup{excl}}, Topology: topo,
			Cores: scheduler.Allocation{Exclusive: [][]int{{2}}}}, "not its SMT sibling 3"},
		{"every core", scheduler.Plan{Profile: &profiles.Profile{ThreadGroups: []profiles.ThreadGroup{excl}}, Topology: topo,
			Cores: scheduler.Allocation{Exclusive: [][]int{{0, 1, 2, 3}}}}, "no shared CPU"},
		{"unknown treatment", scheduler.Plan{Profile: &profiles.Profile{ThreadGroups: []profiles.ThreadGroup{{Name: "x", Treatment: "turbo"}}}, Topology: topo}, `unknown treatment "turbo"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildConfig(tt.plan)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("buildConfig: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	plan := planFor(t, vmtestProfile(t), smtTopology(2))
	cfg, err := buildConfig(plan)
	if err != nil {
		t.Fatal(err)
	}
	// A profile without a catch-all: unmatched workload threads go to the
	// default layer.
	noRest := vmtestProfile(t)
	noRest.ThreadGroups = noRest.ThreadGroups[:3]
	plan2 := planFor(t, noRest, smtTopology(2))
	cfg2, err := buildConfig(plan2)
	if err != nil {
		t.Fatal(err)
	}
	threads := []profiles.Thread{
		{Tid: 10, Tgid: 10, Comm: "workload"},
		{Tid: 11, Tgid: 10, Comm: "wl-compute-0"},
		{Tid: 12, Tgid: 10, Comm: "wl-worker-3"},
		{Tid: 13, Tgid: 10, Comm: "wl-idle-1"},
		{Tid: 14, Tgid: 10, Comm: "wl-timer"},
	}
	tests := []struct {
		name string
		cfg  *config
		cl   *profiles.Classifier
		want map[uint32]uint32
	}{
		{"with a catch-all", cfg, plan.Classifier, map[uint32]uint32{10: 3, 11: 0, 12: 1, 13: 2, 14: 3}},
		{"without", cfg2, plan2.Classifier, map[uint32]uint32{10: 3, 11: 0, 12: 1, 13: 2, 14: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.assign(tt.cl, threads); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("assign: %v, want %v", got, tt.want)
			}
		})
	}
	if cfg2.Names[3] != scheduler.Unmatched {
		t.Errorf("layer 3 of the profile without a catch-all is %q, want default", cfg2.Names[3])
	}
}

// TestLayouts checks the Go mirrors against the C structs, as compiled into
// the embedded object's BTF: same size, and every field at the same offset.
func TestLayouts(t *testing.T) {
	spec, err := bpf.LoadScheduler()
	if err != nil {
		t.Fatal(err)
	}
	elem := func(v string) btf.Type {
		arr, ok := btf.UnderlyingType(spec.Variables[v].Type.Type).(*btf.Array)
		if !ok {
			t.Fatalf("variable %s is not an array", v)
		}
		return arr.Type
	}
	tests := []struct {
		c   btf.Type
		goT any
	}{
		{elem(bpf.SchedulerVarLayers), layerConfig{}},
		{elem(bpf.SchedulerVarCpus), cpuConfig{}},
		{spec.Maps[bpf.SchedulerMapStats].Value, stats{}},
		{spec.Maps[bpf.SchedulerMapCeilings].Value, ceilingState{}},
		{spec.Maps[bpf.SchedulerMapTaskCeilings].Value, taskCeilings{}},
	}
	for _, tt := range tests {
		st, ok := btf.UnderlyingType(tt.c).(*btf.Struct)
		if !ok {
			t.Fatalf("%v is not a struct", tt.c)
		}
		gt := reflect.TypeOf(tt.goT)
		if uintptr(st.Size) != gt.Size() {
			t.Errorf("struct %s: %d bytes in C, %s %d in Go", st.Name, st.Size, gt.Name(), gt.Size())
		}
		if len(st.Members) != gt.NumField() {
			t.Fatalf("struct %s: %d members in C, %d fields in Go", st.Name, len(st.Members), gt.NumField())
		}
		for i, m := range st.Members {
			if off := gt.Field(i).Offset; uintptr(m.Offset.Bytes()) != off {
				t.Errorf("struct %s.%s at %d in C, %s.%s at %d in Go", st.Name, m.Name, m.Offset.Bytes(), gt.Name(), gt.Field(i).Name, off)
			}
		}
	}
	if n := spec.Maps[bpf.SchedulerMapCeilings].MaxEntries; n != maxCeilings {
		t.Errorf("ceilings has %d entries in C, %d in Go", n, maxCeilings)
	}
	for name, n := range map[string]int{bpf.SchedulerVarLayers: maxLayers, bpf.SchedulerVarCpus: maxCPUs, bpf.SchedulerVarDispatchOrder: maxLayers + 1} {
		arr := btf.UnderlyingType(spec.Variables[name].Type.Type).(*btf.Array)
		if int(arr.Nelems) != n {
			t.Errorf("%s has %d elements in C, %d in Go", name, arr.Nelems, n)
		}
	}
}
