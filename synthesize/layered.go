package synthesize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"temper.codes/temper-train/profiles"
)

// scx_layered's limits (scheds/rust/scx_layered/src/bpf/intf.h and
// verify_layer_specs): at most 16 layers; at most 32 OR blocks per layer and
// one condition per match kind (26) in an AND block; layer names up to 128
// bytes; weights 1..10000; a comm is 15 bytes plus NUL.
const (
	layeredMaxLayers = 16
	layeredMaxORs    = 32
	layeredMaxANDs   = 26
	layeredMaxName   = 128
)

// layeredUnprofiled names the terminal layer added when a profile does not
// end in a catch-all: scx_layered's last layer must match every task, and
// threads no group takes keep the default treatment.
const layeredUnprofiled = "unprofiled"

// LayeredSpec exports a profile as scx_layered's layer-spec JSON (the file
// `scx_layered --config` / `f:FILE` reads): one layer per thread group in
// group order (scx_layered's first match wins too), the last layer matching
// every task.
//
// Matches are an OR of AND blocks: each comm prefix (and each process comm
// prefix, crossed with them) starts an AND block that also carries the
// group's CommPrefixExclude, IsGroupLeader and CgroupPrefix conditions. An
// exclusive group becomes a Confined layer with exclusive: true (its cores'
// SMT siblings stay idle) whose cpus_range is pinned to its cores' logical
// CPUs, [cores × threads_per_core] twice, growing from the highest-numbered
// CPUs down as scheduler.Allocate does (growth_algo Reverse); util_range, which
// scx_layered requires, is [0, 1] since the range cannot move. Every other
// treatment is an Open layer: latency with preempt and a higher weight,
// batch and yield with lower weights (weights as Profile gives them when a
// group sets none). rt_priority has no scx_layered equivalent and is left
// out; it is a CFS-backend knob.
//
// A profile scx_layered cannot express is an error naming the group and the
// reason: a comm_regex (scx_layered has no comm regex), a cmdline_prefix
// (it cannot see command lines), an empty or over-long prefix, more layers,
// OR blocks or conditions than it allows, or an exclusive group on a shape
// whose SMT width is unknown.
func LayeredSpec(p *profiles.Profile) ([]byte, error) {
	if p == nil || len(p.ThreadGroups) == 0 {
		return nil, fmt.Errorf("scx_layered export: the profile has no thread groups")
	}
	var layers []layerSpec
	seen := map[string]bool{}
	for i := range p.ThreadGroups {
		g := &p.ThreadGroups[i]
		l, err := layerOf(p, g)
		if err != nil {
			return nil, fmt.Errorf("scx_layered export: group %q: %w", g.Name, err)
		}
		if seen[g.Name] {
			return nil, fmt.Errorf("scx_layered export: group %q: the name is used twice; layer names must be unique", g.Name)
		}
		seen[g.Name] = true
		layers = append(layers, l)
	}
	last := p.ThreadGroups[len(p.ThreadGroups)-1].Match
	if !(last.All && len(last.Kinds()) == 1) {
		layers = append(layers, layerSpec{
			Name:    layeredUnprofiled,
			Comment: "threads no thread group takes: default treatment",
			Matches: [][]layerMatch{{}},
			Kind:    layerKind{Open: &layerCommon{}},
		})
	}
	if len(layers) > layeredMaxLayers {
		return nil, fmt.Errorf("scx_layered export: %d layers (one per thread group plus a terminal catch-all when the profile has none), but scx_layered allows at most %d: merge thread groups", len(layers), layeredMaxLayers)
	}
	for i, l := range layers[:len(layers)-1] {
		if len(l.Matches) == 1 && len(l.Matches[0]) == 0 {
			return nil, fmt.Errorf("scx_layered export: group %q (layer %d) matches every task but is not last: the layers after it would get nothing", l.Name, i)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(layers); err != nil {
		return nil, fmt.Errorf("scx_layered export: %w", err)
	}
	return b.Bytes(), nil
}

// layerOf translates one thread group.
func layerOf(p *profiles.Profile, g *profiles.ThreadGroup) (layerSpec, error) {
	l := layerSpec{Name: g.Name, Comment: fmt.Sprintf("temper profile %s: %s", p.ID, g.Treatment)}
	switch {
	case g.Name == "" || len(g.Name) > layeredMaxName || !utf8.ValidString(g.Name):
		return l, fmt.Errorf("the name must be 1..%d bytes of UTF-8", layeredMaxName)
	}
	m := g.Match
	if len(m.Kinds()) == 0 {
		return l, fmt.Errorf("no matcher: the group matches no thread")
	}
	if m.CommRegex != "" {
		return l, fmt.Errorf("comm_regex %q: scx_layered has no comm regex matcher (a profile that used one once made the scheduler exit before attach); express the group with comm_prefix and exclude_prefix", m.CommRegex)
	}
	if len(m.CmdlinePrefix) > 0 {
		return l, fmt.Errorf("cmdline_prefix %q: scx_layered cannot match a command line; apply this profile with the sched_ext or cfs backend", m.CmdlinePrefix)
	}
	for _, list := range []struct {
		kind string
		v    []string
	}{{"comm_prefix", m.CommPrefix}, {"exclude_prefix", m.ExcludePrefix}, {"pcomm_prefix", m.PcommPrefix}} {
		for _, s := range list.v {
			switch {
			case s == "":
				return l, fmt.Errorf("%s \"\": an empty prefix is every task", list.kind)
			case len(s) > maxComm:
				return l, fmt.Errorf("%s %q is %d bytes; a comm holds %d, so it can never match", list.kind, s, len(s), maxComm)
			case !utf8.ValidString(s):
				return l, fmt.Errorf("%s %q is not valid UTF-8", list.kind, s)
			}
		}
	}

	// The conditions every AND block carries.
	var common []layerMatch
	for _, e := range m.ExcludePrefix {
		common = append(common, layerMatch{"CommPrefixExclude", e})
	}
	if m.GroupLeader != nil {
		common = append(common, layerMatch{"IsGroupLeader", *m.GroupLeader})
	}
	if m.CgroupPrefix != "" {
		common = append(common, layerMatch{"CgroupPrefix", m.CgroupPrefix})
	}
	comms := []*layerMatch{nil}
	if len(m.CommPrefix) > 0 {
		comms = comms[:0]
		for _, c := range m.CommPrefix {
			comms = append(comms, &layerMatch{"CommPrefix", c})
		}
	}
	pcomms := []*layerMatch{nil}
	if len(m.PcommPrefix) > 0 {
		pcomms = pcomms[:0]
		for _, c := range m.PcommPrefix {
			pcomms = append(pcomms, &layerMatch{"PcommPrefix", c})
		}
	}
	if len(comms)*len(pcomms) > layeredMaxORs {
		return l, fmt.Errorf("%d comm × %d process-comm prefixes make %d OR blocks; scx_layered allows %d", len(comms), len(pcomms), len(comms)*len(pcomms), layeredMaxORs)
	}
	for _, c := range comms {
		for _, pc := range pcomms {
			and := []layerMatch{}
			if c != nil {
				and = append(and, *c)
			}
			if pc != nil {
				and = append(and, *pc)
			}
			and = append(and, common...)
			if len(and) > layeredMaxANDs {
				return l, fmt.Errorf("%d conditions in one AND block (%d exclude_prefix entries); scx_layered allows %d", len(and), len(m.ExcludePrefix), layeredMaxANDs)
			}
			l.Matches = append(l.Matches, and)
		}
	}

	c := layerCommon{SliceUs: g.SliceUs, Weight: g.Weight, Preempt: g.Preempt}
	if c.Weight == 0 {
		c.Weight = weightOf(g.Treatment)
	}
	if c.Weight < 1 || c.Weight > 10000 {
		return l, fmt.Errorf("weight %d is outside scx_layered's 1..10000", c.Weight)
	}
	if g.Treatment != profiles.Exclusive {
		l.Kind.Open = &c
		return l, nil
	}
	tpc := p.MachineShape.SMTWidth()
	switch {
	case g.ExclusiveCores <= 0:
		return l, fmt.Errorf("exclusive without exclusive_cores")
	case tpc == 0:
		return l, fmt.Errorf("exclusive: the shape %s does not say how many logical CPUs a core has, and scx_layered's cpus_range counts logical CPUs; give the shape threads_per_core", p.MachineShape.Key())
	}
	n := g.ExclusiveCores * tpc
	c.Exclusive = true
	c.GrowthAlgo = "Reverse"
	l.Kind.Confined = &layerConfined{UtilRange: [2]float64{0, 1}, CPUsRange: [2]int{n, n}, layerCommon: c}
	l.Comment += fmt.Sprintf(", %d whole core%s (%d CPUs, siblings idle)", g.ExclusiveCores, plural(g.ExclusiveCores), n)
	return l, nil
}

// layerSpec is one element of scx_layered's JSON array (its LayerSpec).
type layerSpec struct {
	Name    string         `json:"name"`
	Comment string         `json:"comment,omitempty"`
	Matches [][]layerMatch `json:"matches"`
	Kind    layerKind      `json:"kind"`
}

// layerMatch is one LayerMatch: an externally tagged enum, {"Kind": value}.
type layerMatch struct {
	kind  string
	value any
}

func (m layerMatch) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{m.kind: m.value})
}

// layerKind is the LayerKind enum; exactly one field is set.
type layerKind struct {
	Confined *layerConfined `json:"Confined,omitempty"`
	Open     *layerCommon   `json:"Open,omitempty"`
}

type layerConfined struct {
	UtilRange [2]float64 `json:"util_range"`
	CPUsRange [2]int     `json:"cpus_range"`
	layerCommon
}

// layerCommon are the LayerCommon fields the export sets; scx_layered's
// defaults apply to the rest.
type layerCommon struct {
	SliceUs    int    `json:"slice_us,omitempty"`
	Weight     int    `json:"weight,omitempty"`
	Preempt    bool   `json:"preempt,omitempty"`
	Exclusive  bool   `json:"exclusive,omitempty"`
	GrowthAlgo string `json:"growth_algo,omitempty"`
}
