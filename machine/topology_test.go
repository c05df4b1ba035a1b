package machine

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/testkit"
)

// fakeCPU describes one CPU of a fake sysfs tree.
type fakeCPU struct {
	core, pkg int
	siblings  string
	caches    []fakeCache
}

type fakeCache struct {
	level  int
	typ    string
	shared string
	id     int // -1: no id file
}

// fakeSysfs builds sys/devices/system/{cpu,node} under a temporary root.
func fakeSysfs(t *testing.T, online string, cpus map[int]fakeCPU, nodes map[int]string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"sys/devices/system/cpu/online": online + "\n"}
	for id, c := range cpus {
		d := "sys/devices/system/cpu/cpu" + strconv.Itoa(id) + "/"
		files[d+"topology/core_id"] = strconv.Itoa(c.core) + "\n"
		files[d+"topology/physical_package_id"] = strconv.Itoa(c.pkg) + "\n"
		files[d+"topology/thread_siblings_list"] = c.siblings + "\n"
		for i, ca := range c.caches {
			ix := d + "cache/index" + strconv.Itoa(i) + "/"
			files[ix+"level"] = strconv.Itoa(ca.level) + "\n"
			files[ix+"type"] = ca.typ + "\n"
			files[ix+"shared_cpu_list"] = ca.shared + "\n"
			if ca.id >= 0 {
				files[ix+"id"] = strconv.Itoa(ca.id) + "\n"
			}
		}
	}
	for id, list := range nodes {
		files["sys/devices/system/node/node"+strconv.Itoa(id)+"/cpulist"] = list + "\n"
	}
	if nodes != nil {
		files["sys/devices/system/node/has_cpu"] = "0-1\n" // a file that is not a node
	}
	testkit.WriteTree(t, root, files)
	return root
}

// twoSocketSMT is 2 packages × 2 cores × 2 threads, numbered the way x86
// enumerates them: the first thread of every core, then the second ones.
// Core ids restart in each package, so (package, core) or the sibling set
// tells cores apart, core_id alone does not.
func twoSocketSMT() (map[int]fakeCPU, map[int]string) {
	cpus := map[int]fakeCPU{}
	for cpu := range 8 {
		pkg := (cpu % 4) / 2
		core := cpu % 2
		sib := strconv.Itoa(cpu%4) + "," + strconv.Itoa(cpu%4+4)
		l3 := []string{"0-1,4-5", "2-3,6-7"}[pkg]
		cpus[cpu] = fakeCPU{core: core, pkg: pkg, siblings: sib, caches: []fakeCache{
			{1, "Data", sib, core},
			{1, "Instruction", sib, core},
			{2, "Unified", sib, core},
			{3, "Unified", l3, pkg},
		}}
	}
	return cpus, map[int]string{0: "0-1,4-5", 1: "2-3,6-7", 2: ""} // node 2: memory only
}

func TestReadTopologyTwoSocketSMT(t *testing.T) {
	cpus, nodes := twoSocketSMT()
	topo, err := ReadTopology(fakeSysfs(t, "0-7", cpus, nodes))
	if err != nil {
		t.Fatal(err)
	}
	wantCores := []Core{
		{Package: 0, CoreID: 0, CPUs: []int{0, 4}},
		{Package: 0, CoreID: 1, CPUs: []int{1, 5}},
		{Package: 1, CoreID: 0, CPUs: []int{2, 6}},
		{Package: 1, CoreID: 1, CPUs: []int{3, 7}},
	}
	if !reflect.DeepEqual(topo.Cores, wantCores) {
		t.Errorf("cores %+v\nwant %+v", topo.Cores, wantCores)
	}
	wantLLCs := []LLC{{ID: 0, Level: 3, CPUs: []int{0, 1, 4, 5}}, {ID: 1, Level: 3, CPUs: []int{2, 3, 6, 7}}}
	if !reflect.DeepEqual(topo.LLCs, wantLLCs) {
		t.Errorf("llcs %+v\nwant %+v", topo.LLCs, wantLLCs)
	}
	wantNodes := []NUMANode{{ID: 0, CPUs: []int{0, 1, 4, 5}}, {ID: 1, CPUs: []int{2, 3, 6, 7}}}
	if !reflect.DeepEqual(topo.NUMANodes, wantNodes) {
		t.Errorf("numa nodes %+v\nwant %+v", topo.NUMANodes, wantNodes)
	}
	want6 := CPU{ID: 6, CoreID: 0, Package: 1, Siblings: []int{2, 6}, Core: 2, LLC: 1, NUMANode: 1}
	if !reflect.DeepEqual(topo.CPUs[6], want6) {
		t.Errorf("cpu6 %+v\nwant %+v", topo.CPUs[6], want6)
	}
	checkPartition(t, "cores", topo.Online, coreSets(topo))
}

func TestReadTopologyVariants(t *testing.T) {
	tests := []struct {
		name      string
		online    string
		cpus      func() map[int]fakeCPU
		nodes     map[int]string
		wantCores [][]int
		wantLLCs  []LLC
		wantNodes []NUMANode
		cpuLLC    []int // CPU.LLC per online CPU
	}{
		{
			// cpu7 offline: the kernel drops it from its sibling's list and
			// from the shared lists; ReadTopology must not list it either.
			name:   "smt with an offline cpu",
			online: "0-6",
			cpus: func() map[int]fakeCPU {
				c, _ := twoSocketSMT()
				delete(c, 7)
				c3 := c[3]
				c3.siblings = "3"
				c[3] = c3
				return c
			},
			nodes:     map[int]string{0: "0-1,4-5", 1: "2-3,6-7"},
			wantCores: [][]int{{0, 4}, {1, 5}, {2, 6}, {3}},
			wantLLCs:  []LLC{{ID: 0, Level: 3, CPUs: []int{0, 1, 4, 5}}, {ID: 1, Level: 3, CPUs: []int{2, 3, 6}}},
			wantNodes: []NUMANode{{ID: 0, CPUs: []int{0, 1, 4, 5}}, {ID: 1, CPUs: []int{2, 3, 6}}},
			cpuLLC:    []int{0, 0, 1, 1, 0, 0, 1},
		},
		{
			// Like this CI machine: no SMT, no cache directory, no NUMA.
			name:   "vm without cache or node info",
			online: "0-1",
			cpus: func() map[int]fakeCPU {
				return map[int]fakeCPU{0: {0, 0, "0", nil}, 1: {1, 0, "1", nil}}
			},
			wantCores: [][]int{{0}, {1}},
			wantLLCs:  []LLC{},
			wantNodes: []NUMANode{},
			cpuLLC:    []int{-1, -1},
		},
		{
			// No L3: the highest level is the LLC; the L2 has no id file.
			name:   "l2 is last level",
			online: "0-3",
			cpus: func() map[int]fakeCPU {
				m := map[int]fakeCPU{}
				for c := range 4 {
					l2 := []string{"0-1", "2-3"}[c/2]
					m[c] = fakeCPU{c, 0, strconv.Itoa(c), []fakeCache{
						{2, "Unified", l2, -1}, {1, "Instruction", strconv.Itoa(c), -1}, {1, "Data", strconv.Itoa(c), -1},
					}}
				}
				return m
			},
			nodes:     map[int]string{0: "0-3"},
			wantCores: [][]int{{0}, {1}, {2}, {3}},
			wantLLCs:  []LLC{{ID: -1, Level: 2, CPUs: []int{0, 1}}, {ID: -1, Level: 2, CPUs: []int{2, 3}}},
			wantNodes: []NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}},
			cpuLLC:    []int{0, 0, 1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := ReadTopology(fakeSysfs(t, tt.online, tt.cpus(), tt.nodes))
			if err != nil {
				t.Fatal(err)
			}
			if got := coreSets(topo); !reflect.DeepEqual(got, tt.wantCores) {
				t.Errorf("cores %v, want %v", got, tt.wantCores)
			}
			if !reflect.DeepEqual(topo.LLCs, tt.wantLLCs) {
				t.Errorf("llcs %+v, want %+v", topo.LLCs, tt.wantLLCs)
			}
			if !reflect.DeepEqual(topo.NUMANodes, tt.wantNodes) {
				t.Errorf("nodes %+v, want %+v", topo.NUMANodes, tt.wantNodes)
			}
			var llc []int
			for _, c := range topo.CPUs {
				llc = append(llc, c.LLC)
				if len(tt.wantNodes) == 0 && c.NUMANode != -1 {
					t.Errorf("cpu%d: numa node %d without node info", c.ID, c.NUMANode)
				}
			}
			if !slices.Equal(llc, tt.cpuLLC) {
				t.Errorf("cpu llc indexes %v, want %v", llc, tt.cpuLLC)
			}
		})
	}
}

func TestReadTopologyErrors(t *testing.T) {
	tests := []struct {
		name   string
		online string
		cpus   map[int]fakeCPU
		remove string
		want   string
	}{
		{"no online file", "0", map[int]fakeCPU{0: {0, 0, "0", nil}}, "sys/devices/system/cpu/online", "online"},
		{"bad online list", "0-x", nil, "", "bad range"},
		{"empty online list", "", nil, "", "no online CPUs"},
		{"missing core_id", "0", map[int]fakeCPU{0: {0, 0, "0", nil}}, "sys/devices/system/cpu/cpu0/topology/core_id", "core_id"},
		{"bad siblings", "0", map[int]fakeCPU{0: {0, 0, "0-", nil}}, "", "thread_siblings_list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeSysfs(t, tt.online, tt.cpus, nil)
			if tt.remove != "" {
				os.Remove(filepath.Join(root, tt.remove))
			}
			_, err := ReadTopology(root)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestReadTopologyReal reads this machine's sysfs and checks it against
// what the kernel tells Go.
func TestReadTopologyReal(t *testing.T) {
	topo, err := ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	online, err := ParseCPUList(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(topo.Online, online) || len(topo.CPUs) != len(online) {
		t.Fatalf("online %v with %d CPUs, want %v", topo.Online, len(topo.CPUs), online)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	if set.Count() != runtime.NumCPU() {
		t.Fatalf("affinity has %d CPUs, runtime.NumCPU %d", set.Count(), runtime.NumCPU())
	}
	for cpu := range 1024 {
		if set.IsSet(cpu) && !slices.Contains(topo.Online, cpu) {
			t.Errorf("CPU %d is in this process's affinity but not online", cpu)
		}
	}
	if len(topo.Online) < runtime.NumCPU() {
		t.Errorf("%d online CPUs < runtime.NumCPU %d", len(topo.Online), runtime.NumCPU())
	}
	checkPartition(t, "cores", topo.Online, coreSets(topo))
	if len(topo.LLCs) > 0 {
		var sets [][]int
		for _, l := range topo.LLCs {
			sets = append(sets, l.CPUs)
		}
		checkPartition(t, "llcs", topo.Online, sets)
	}
	if len(topo.NUMANodes) > 0 {
		var sets [][]int
		for _, n := range topo.NUMANodes {
			sets = append(sets, n.CPUs)
		}
		checkPartition(t, "numa nodes", topo.Online, sets)
	}
	for i, c := range topo.CPUs {
		if c.ID != topo.Online[i] || !slices.Contains(topo.Cores[c.Core].CPUs, c.ID) {
			t.Errorf("cpu %+v inconsistent with core %+v", c, topo.Cores[c.Core])
		}
	}
	t.Logf("real topology: online %s, %d cores, %d llcs, %d numa nodes", topo.OnlineList, len(topo.Cores), len(topo.LLCs), len(topo.NUMANodes))
}

func coreSets(topo *Topology) [][]int {
	var out [][]int
	for _, c := range topo.Cores {
		out = append(out, c.CPUs)
	}
	return out
}

// checkPartition fails unless sets cover online with every CPU once.
func checkPartition(t *testing.T, what string, online []int, sets [][]int) {
	t.Helper()
	seen := map[int]int{}
	for _, s := range sets {
		for _, c := range s {
			seen[c]++
		}
	}
	for _, c := range online {
		if seen[c] != 1 {
			t.Errorf("%s: CPU %d appears %d times in %v", what, c, seen[c], sets)
		}
		delete(seen, c)
	}
	for c := range seen {
		t.Errorf("%s: CPU %d is not online", what, c)
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", []int{}, false},
		{"\n", []int{}, false},
		{"0", []int{0}, false},
		{"0-3\n", []int{0, 1, 2, 3}, false},
		{"0-1,4-5", []int{0, 1, 4, 5}, false},
		{"8,0-1,1", []int{0, 1, 8}, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1-", nil, true},
		{"-1", nil, true},
		{"0,,1", nil, true},
		{"0-99999999", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err != nil) != tt.wantErr || (err == nil && !slices.Equal(got, tt.want)) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
