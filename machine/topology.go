package machine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"temper.codes/temper-train/internal/procfs"
)

// Topology is the CPU layout of the host as sysfs describes it: which logical
// CPUs are online and how they share cores, last-level caches and memory
// nodes. The scheduler's placement decisions are judged against it.
//
// CPU, core, LLC and node sets are sorted lists of logical CPU numbers.
type Topology struct {
	OnlineList string `json:"online_list"` // /sys/devices/system/cpu/online as written
	Online     []int  `json:"online"`
	CPUs       []CPU  `json:"cpus"` // one per online CPU, in CPU order

	// Cores are the physical cores: each is a set of SMT siblings. Without
	// SMT every core holds one CPU.
	Cores []Core `json:"cores"`
	// LLCs are the last-level caches, each with the CPUs sharing it. Empty
	// when sysfs has no cache information (some virtual machines).
	LLCs []LLC `json:"llcs"`
	// NUMANodes are the memory nodes with CPUs. Empty when the kernel exposes
	// no /sys/devices/system/node (built without NUMA).
	NUMANodes []NUMANode `json:"numa_nodes"`
}

// SiblingLists returns, indexed by CPU id, each online CPU's SMT siblings
// (itself included), the form the tracer takes (observe's record options).
// Offline CPUs get nil.
func (t *Topology) SiblingLists() [][]int {
	if t == nil {
		return nil
	}
	var out [][]int
	for _, c := range t.CPUs {
		for len(out) <= c.ID {
			out = append(out, nil)
		}
		out[c.ID] = c.Siblings
	}
	return out
}

// CPU is one online logical CPU.
type CPU struct {
	ID       int   `json:"id"`
	CoreID   int   `json:"core_id"`    // topology/core_id: unique within a package only
	Package  int   `json:"package_id"` // topology/physical_package_id
	Siblings []int `json:"siblings"`   // SMT siblings including itself (thread_siblings_list)
	Core     int   `json:"core"`       // index in Topology.Cores
	LLC      int   `json:"llc"`        // index in Topology.LLCs; -1 when unknown
	NUMANode int   `json:"numa_node"`  // node id; -1 when unknown
}

// Core is one physical core.
type Core struct {
	Package int   `json:"package_id"`
	CoreID  int   `json:"core_id"`
	CPUs    []int `json:"cpus"`
}

// LLC is one last-level cache: the cache of level 3 when the CPUs have one,
// else the highest level present.
type LLC struct {
	ID    int   `json:"id"` // the cache's sysfs id; -1 when the kernel gives none
	Level int   `json:"level"`
	CPUs  []int `json:"cpus"` // shared_cpu_list, restricted to online CPUs
}

// NUMANode is one memory node and its online CPUs.
type NUMANode struct {
	ID   int   `json:"id"`
	CPUs []int `json:"cpus"`
}

// ReadTopology reads the CPU topology from the sysfs below root: root is "/"
// on a live system and a directory holding a fake
// sys/devices/system/{cpu,node} tree in tests.
func ReadTopology(root string) (*Topology, error) {
	cpuDir := filepath.Join(root, "sys/devices/system/cpu")
	onlinePath := filepath.Join(cpuDir, "online")
	onlineList, err := procfs.FirstLine(onlinePath)
	if err != nil {
		return nil, err
	}
	online, err := ParseCPUList(onlineList)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", onlinePath, err)
	}
	if len(online) == 0 {
		return nil, fmt.Errorf("read %s: no online CPUs", onlinePath)
	}
	isOnline := map[int]bool{}
	for _, c := range online {
		isOnline[c] = true
	}
	t := &Topology{OnlineList: onlineList, Online: online, Cores: []Core{}, LLCs: []LLC{}, NUMANodes: []NUMANode{}}

	nodeOf, nodes, err := readNUMA(filepath.Join(root, "sys/devices/system/node"), isOnline)
	if err != nil {
		return nil, err
	}
	t.NUMANodes = nodes

	coreIndex := map[string]int{}
	llcIndex := map[string]int{}
	for _, id := range online {
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(id))
		c := CPU{ID: id, LLC: -1, NUMANode: -1}
		if n, ok := nodeOf[id]; ok {
			c.NUMANode = n
		}
		if c.CoreID, err = readInt(filepath.Join(dir, "topology/core_id")); err != nil {
			return nil, err
		}
		if c.Package, err = readInt(filepath.Join(dir, "topology/physical_package_id")); err != nil {
			return nil, err
		}
		if c.Siblings, err = readCPUListFile(filepath.Join(dir, "topology/thread_siblings_list"), isOnline); err != nil {
			return nil, err
		}
		if !slices.Contains(c.Siblings, id) {
			c.Siblings = append(c.Siblings, id)
			slices.Sort(c.Siblings)
		}
		key := cpuSetKey(c.Siblings)
		idx, ok := coreIndex[key]
		if !ok {
			idx = len(t.Cores)
			coreIndex[key] = idx
			t.Cores = append(t.Cores, Core{Package: c.Package, CoreID: c.CoreID, CPUs: c.Siblings})
		}
		c.Core = idx

		llc, err := readLLC(filepath.Join(dir, "cache"), isOnline)
		if err != nil {
			return nil, err
		}
		if llc != nil {
			key := strconv.Itoa(llc.Level) + "/" + cpuSetKey(llc.CPUs)
			idx, ok := llcIndex[key]
			if !ok {
				idx = len(t.LLCs)
				llcIndex[key] = idx
				t.LLCs = append(t.LLCs, *llc)
			}
			c.LLC = idx
		}
		t.CPUs = append(t.CPUs, c)
	}
	return t, nil
}

// readLLC picks the last-level cache among dir/index*: level 3 if present,
// else the highest level, ignoring instruction caches. It returns nil when
// the CPU has no cache directory.
func readLLC(dir string, isOnline map[int]bool) (*LLC, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var best *LLC
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		idx := filepath.Join(dir, e.Name())
		typ, err := procfs.FirstLine(filepath.Join(idx, "type"))
		if err != nil {
			return nil, err
		}
		if typ == "Instruction" {
			continue
		}
		level, err := readInt(filepath.Join(idx, "level"))
		if err != nil {
			return nil, err
		}
		if best != nil && (best.Level == 3 || level <= best.Level) {
			continue
		}
		cpus, err := readCPUListFile(filepath.Join(idx, "shared_cpu_list"), isOnline)
		if err != nil {
			return nil, err
		}
		id := -1
		if v, err := readInt(filepath.Join(idx, "id")); err == nil {
			id = v
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		best = &LLC{ID: id, Level: level, CPUs: cpus}
	}
	return best, nil
}

// readNUMA reads node*/cpulist below dir. It returns each online CPU's node
// and the nodes that have online CPUs; both are empty when dir is absent.
func readNUMA(dir string, isOnline map[int]bool) (map[int]int, []NUMANode, error) {
	nodeOf := map[int]int{}
	nodes := []NUMANode{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nodeOf, nodes, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(num)
		if err != nil {
			continue // "node" files such as has_cpu are not node directories
		}
		cpus, err := readCPUListFile(filepath.Join(dir, e.Name(), "cpulist"), isOnline)
		if err != nil {
			return nil, nil, err
		}
		if len(cpus) == 0 {
			continue // memory-only node
		}
		for _, c := range cpus {
			nodeOf[c] = id
		}
		nodes = append(nodes, NUMANode{ID: id, CPUs: cpus})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodeOf, nodes, nil
}

// readCPUListFile reads a CPU list file and keeps the online CPUs.
func readCPUListFile(path string, isOnline map[int]bool) ([]int, error) {
	line, err := procfs.FirstLine(path)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseCPUList(line)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return slices.DeleteFunc(cpus, func(c int) bool { return !isOnline[c] }), nil
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int, error) {
	line, err := procfs.FirstLine(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(line)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

// cpuSetKey is a map key for a sorted CPU set.
func cpuSetKey(cpus []int) string {
	var b strings.Builder
	for i, c := range cpus {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	return b.String()
}
