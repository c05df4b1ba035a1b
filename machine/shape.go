package machine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Shape is a machine shape. Zero fields match any machine; resolution
// prefers the profile whose shape fixes the most fields.
type Shape struct {
	LogicalCPUs    int `toml:"logical_cpus,omitempty"`
	Cores          int `toml:"cores,omitempty"`
	ThreadsPerCore int `toml:"threads_per_core,omitempty"`
	NUMANodes      int `toml:"numa_nodes,omitempty"`
}

// Key is the shape's file name stem, e.g. "8cpu-4c-smt2"; "any" for the zero
// shape. Unset parts are left out ("4c-smt2").
func (s Shape) Key() string {
	var parts []string
	if s.LogicalCPUs > 0 {
		parts = append(parts, fmt.Sprintf("%dcpu", s.LogicalCPUs))
	}
	if s.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%dc", s.Cores))
	}
	if s.ThreadsPerCore > 0 {
		parts = append(parts, fmt.Sprintf("smt%d", s.ThreadsPerCore))
	}
	if s.NUMANodes > 1 {
		parts = append(parts, fmt.Sprintf("%dnuma", s.NUMANodes))
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, "-")
}

// ShapeOf reads a machine shape from a CPU topology: online logical CPUs,
// physical cores, threads per core when every core has the same number (a
// hybrid CPU with SMT and non-SMT cores leaves it unset), and NUMA nodes
// when sysfs listed them.
func ShapeOf(t *Topology) (Shape, error) {
	if t == nil || len(t.Online) == 0 {
		return Shape{}, errors.New("no CPU topology")
	}
	s := Shape{LogicalCPUs: len(t.Online), Cores: len(t.Cores), NUMANodes: len(t.NUMANodes)}
	for i, c := range t.Cores {
		if i == 0 {
			s.ThreadsPerCore = len(c.CPUs)
		} else if len(c.CPUs) != s.ThreadsPerCore {
			s.ThreadsPerCore = 0
			break
		}
	}
	if err := s.Check(); err != nil {
		return Shape{}, fmt.Errorf("the CPU topology is inconsistent: %w", err)
	}
	return s, nil
}

// maxThreadsPerCore bounds SMT: no shipping CPU has more than 8 hardware
// threads per core (POWER8/9 SMT8).
const maxThreadsPerCore = 8

// ParseShape reads a shape key as Shape.Key writes it: "8cpu-4c-smt2",
// "4c-smt2", "16cpu-8c-smt2-2numa", or "any" for the zero shape. Parts may
// come in any order, each at most once. It rejects shapes no machine has
// (see Shape.Check).
func ParseShape(key string) (Shape, error) {
	var s Shape
	if key == "any" {
		return s, nil
	}
	if key == "" {
		return s, fmt.Errorf("shape: empty; write e.g. 8cpu-4c-smt2 or any")
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(key, "-") {
		var unit, digits string
		switch {
		case strings.HasPrefix(part, "smt"):
			unit, digits = "smt", part[3:]
		case strings.HasSuffix(part, "numa"):
			unit, digits = "numa", strings.TrimSuffix(part, "numa")
		case strings.HasSuffix(part, "cpu"):
			unit, digits = "cpu", strings.TrimSuffix(part, "cpu")
		case strings.HasSuffix(part, "c"):
			unit, digits = "c", strings.TrimSuffix(part, "c")
		default:
			return Shape{}, fmt.Errorf("shape %q: part %q is none of Ncpu, Nc, smtN, Nnuma (e.g. 8cpu-4c-smt2)", key, part)
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n <= 0 || digits[0] == '0' || digits[0] == '+' {
			return Shape{}, fmt.Errorf("shape %q: part %q: want a positive count", key, part)
		}
		if seen[unit] {
			return Shape{}, fmt.Errorf("shape %q: part %q given twice", key, part)
		}
		seen[unit] = true
		switch unit {
		case "cpu":
			s.LogicalCPUs = n
		case "c":
			s.Cores = n
		case "smt":
			s.ThreadsPerCore = n
		case "numa":
			s.NUMANodes = n
		}
	}
	if err := s.Check(); err != nil {
		return Shape{}, fmt.Errorf("shape %q: %w", key, err)
	}
	return s, nil
}

// Check reports a shape no machine can have: negative counts, more than
// eight threads per core, logical CPUs that are not cores × threads per
// core, fewer CPUs than cores, more NUMA nodes than cores.
func (s Shape) Check() error {
	switch {
	case s.LogicalCPUs < 0 || s.Cores < 0 || s.ThreadsPerCore < 0 || s.NUMANodes < 0:
		return fmt.Errorf("negative count in %+v", s)
	case s.ThreadsPerCore > maxThreadsPerCore:
		return fmt.Errorf("threads_per_core = %d: no CPU has more than %d", s.ThreadsPerCore, maxThreadsPerCore)
	case s.LogicalCPUs > 0 && s.Cores > 0 && s.ThreadsPerCore > 0 && s.LogicalCPUs != s.Cores*s.ThreadsPerCore:
		return fmt.Errorf("logical_cpus = %d but cores × threads_per_core = %d × %d = %d", s.LogicalCPUs, s.Cores, s.ThreadsPerCore, s.Cores*s.ThreadsPerCore)
	case s.LogicalCPUs > 0 && s.Cores > 0 && s.LogicalCPUs < s.Cores:
		return fmt.Errorf("logical_cpus = %d is fewer than cores = %d", s.LogicalCPUs, s.Cores)
	case s.LogicalCPUs > 0 && s.Cores > 0 && s.LogicalCPUs%s.Cores != 0:
		return fmt.Errorf("logical_cpus = %d is not a multiple of cores = %d", s.LogicalCPUs, s.Cores)
	case s.LogicalCPUs > 0 && s.ThreadsPerCore > 0 && s.LogicalCPUs%s.ThreadsPerCore != 0:
		return fmt.Errorf("logical_cpus = %d is not a multiple of threads_per_core = %d", s.LogicalCPUs, s.ThreadsPerCore)
	case s.NUMANodes > 0 && s.Cores > 0 && s.NUMANodes > s.Cores:
		return fmt.Errorf("numa_nodes = %d is more than cores = %d", s.NUMANodes, s.Cores)
	}
	return nil
}

// Specificity is how many of the shape's fields are set; resolution prefers
// the profile whose shape fixes the most.
func (s Shape) Specificity() int {
	n := 0
	for _, v := range []int{s.LogicalCPUs, s.Cores, s.ThreadsPerCore, s.NUMANodes} {
		if v != 0 {
			n++
		}
	}
	return n
}

// Matches reports whether a profile keyed to s may run on machine: every
// field s sets equals machine's. A field the machine leaves zero (unknown)
// does not rule a profile out.
func (s Shape) Matches(machine Shape) bool {
	eq := func(want, have int) bool { return want == 0 || have == 0 || want == have }
	return eq(s.LogicalCPUs, machine.LogicalCPUs) && eq(s.Cores, machine.Cores) &&
		eq(s.ThreadsPerCore, machine.ThreadsPerCore) && eq(s.NUMANodes, machine.NUMANodes)
}

// SMTWidth is the shape's hardware threads per core, derived from CPUs and
// cores when not given; 0 when unknown.
func (s Shape) SMTWidth() int {
	switch {
	case s.ThreadsPerCore > 0:
		return s.ThreadsPerCore
	case s.LogicalCPUs > 0 && s.Cores > 0 && s.LogicalCPUs%s.Cores == 0:
		return s.LogicalCPUs / s.Cores
	}
	return 0
}

// CoreCount is the shape's physical core count, derived from CPUs and SMT
// width when not given; 0 when unknown.
func (s Shape) CoreCount() int {
	switch {
	case s.Cores > 0:
		return s.Cores
	case s.LogicalCPUs > 0 && s.ThreadsPerCore > 0:
		return s.LogicalCPUs / s.ThreadsPerCore
	}
	return 0
}
