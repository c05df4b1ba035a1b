package synthesize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// The layer-spec vocabulary of scx_layered (scheds/rust/scx_layered/src/
// config.rs and layer_core_growth.rs), written down independently of the
// exporter so that the validator checks the exporter rather than itself.
var (
	layeredStringMatches = []string{"CgroupPrefix", "CgroupSuffix", "CgroupContains", "CgroupRegex",
		"CommPrefix", "CommPrefixExclude", "PcommPrefix", "PcommPrefixExclude", "CmdJoin"}
	layeredBoolMatches = []string{"IsGroupLeader", "IsKthread", "UsedGpuTid", "UsedGpuPid"}
	layeredIntMatches  = []string{"NiceAbove", "NiceBelow", "NiceEquals", "UIDEquals", "GIDEquals",
		"PIDEquals", "PPIDEquals", "TGIDEquals", "NSEquals", "HintEquals", "NumaNode"}
	layeredOtherMatches = []string{"NSPIDEquals", "AvgRuntime", "SystemCpuUtilBelow", "DsqInsertBelow"}
	layeredCommon       = []string{"min_exec_us", "yield_ignore", "slice_us", "fifo", "preempt", "preempt_first",
		"exclusive", "allow_node_aligned", "skip_remote_node", "prev_over_idle_core", "weight",
		"disallow_open_after_us", "disallow_preempt_after_us", "xllc_mig_min_us", "idle_smt", "growth_algo",
		"util_peak_half_life_ms", "perf", "idle_resume_us", "nodes", "llcs", "placement", "member_expire_ms",
		"xnuma_threshold", "xnuma_threshold_delta"}
	layeredConfined = []string{"util_range", "cpus_range", "cpus_range_frac", "membw_gb", "protected"}
	layeredGrouped  = []string{"util_range", "util_includes_open_cputime", "cpus_range", "cpus_range_frac",
		"membw_gb", "protected", "idle_confined"}
	layeredGrowth = []string{"Sticky", "Linear", "Reverse", "Random", "Topo", "RoundRobin", "BigLittle",
		"LittleBig", "NodeSpread", "NodeSpreadReverse", "NodeSpreadRandom", "CpuSetSpread",
		"CpuSetSpreadReverse", "CpuSetSpreadRandom", "RandomTopo", "StickyDynamic"}
)

// vLayer is a decoded layer as the validator keeps it.
type vLayer struct {
	name string
	ors  [][]map[string]any
}

// validateLayered checks an exported spec against scx_layered's rules: a
// JSON array of 1..16 layers with unique names; every layer but the last has
// matches and none of them matches everything, the last matches everything
// ([[]]); at most 32 OR blocks of at most 26 conditions; each condition one
// known kind with a value of its type, comm prefixes 1..15 bytes; one kind
// of Confined, Grouped or Open with only the fields it has; util_range
// required on Confined and Grouped with 0 ≤ lo < hi ≤ 1; cpus_range
// ordered; weight 1..10000; a known growth_algo; exclusive CPUs leave at
// least one core of the shape shared. Unknown fields are errors here
// although scx_layered ignores them: ignoring a misspelt field is how a
// setting silently does nothing.
func validateLayered(data []byte, shape profiles.Shape) ([]vLayer, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw []map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON array of objects: %v", err)
	}
	if len(raw) == 0 || len(raw) > 16 {
		return nil, fmt.Errorf("%d layers, want 1..16", len(raw))
	}
	var layers []vLayer
	exclusiveCPUs := 0
	for i, l := range raw {
		for k := range l {
			if !slices.Contains([]string{"name", "comment", "matches", "kind"}, k) {
				return nil, fmt.Errorf("layer %d: unknown field %q", i, k)
			}
		}
		name, ok := l["name"].(string)
		if !ok || name == "" || len(name) > 128 {
			return nil, fmt.Errorf("layer %d: name %v", i, l["name"])
		}
		if slices.ContainsFunc(layers, func(v vLayer) bool { return v.name == name }) {
			return nil, fmt.Errorf("layer %q twice", name)
		}
		if c, ok := l["comment"]; ok {
			if _, ok := c.(string); !ok {
				return nil, fmt.Errorf("layer %q: comment %v", name, c)
			}
		}
		v := vLayer{name: name}
		ors, ok := l["matches"].([]any)
		if !ok {
			return nil, fmt.Errorf("layer %q: matches is not an array", name)
		}
		last := i == len(raw)-1
		switch {
		case last && (len(ors) != 1 || len(ors[0].([]any)) != 0):
			return nil, fmt.Errorf("terminal layer %q must match everything with [[]], has %v", name, ors)
		case !last && len(ors) == 0:
			return nil, fmt.Errorf("non-terminal layer %q has no matches", name)
		case len(ors) > 32:
			return nil, fmt.Errorf("layer %q: %d OR blocks", name, len(ors))
		}
		for _, o := range ors {
			ands, ok := o.([]any)
			if !ok {
				return nil, fmt.Errorf("layer %q: OR block %v is not an array", name, o)
			}
			if len(ands) > 26 || !last && len(ands) == 0 {
				return nil, fmt.Errorf("layer %q: AND block of %d conditions", name, len(ands))
			}
			var block []map[string]any
			for _, a := range ands {
				m, ok := a.(map[string]any)
				if !ok || len(m) != 1 {
					return nil, fmt.Errorf("layer %q: condition %v is not a one-key object", name, a)
				}
				for k, val := range m {
					if err := checkCondition(k, val); err != nil {
						return nil, fmt.Errorf("layer %q: %v", name, err)
					}
				}
				block = append(block, m)
			}
			v.ors = append(v.ors, block)
		}
		kind, ok := l["kind"].(map[string]any)
		if !ok || len(kind) != 1 {
			return nil, fmt.Errorf("layer %q: kind %v is not one of Confined, Grouped, Open", name, l["kind"])
		}
		for k, body := range kind {
			fields, ok := body.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("layer %q: %s is not an object", name, k)
			}
			allowed := slices.Clone(layeredCommon)
			switch k {
			case "Confined":
				allowed = append(allowed, layeredConfined...)
			case "Grouped":
				allowed = append(allowed, layeredGrouped...)
			case "Open":
			default:
				return nil, fmt.Errorf("layer %q: unknown kind %q", name, k)
			}
			for f := range fields {
				if !slices.Contains(allowed, f) {
					return nil, fmt.Errorf("layer %q: %s has no field %q", name, k, f)
				}
			}
			if k != "Open" {
				u, ok := fields["util_range"].([]any)
				if !ok || len(u) != 2 {
					return nil, fmt.Errorf("layer %q: %s needs util_range [lo, hi]", name, k)
				}
				lo, hi := num(u[0]), num(u[1])
				if !(0 <= lo && lo < hi && hi <= 1) {
					return nil, fmt.Errorf("layer %q: util_range [%v, %v]", name, lo, hi)
				}
				if cr, ok := fields["cpus_range"]; ok {
					r, ok := cr.([]any)
					if !ok || len(r) != 2 || !isInt(r[0]) || !isInt(r[1]) || num(r[0]) > num(r[1]) || num(r[0]) < 0 {
						return nil, fmt.Errorf("layer %q: cpus_range %v", name, cr)
					}
					if fields["exclusive"] == true {
						exclusiveCPUs += int(num(r[1]))
					}
				}
			}
			if w, ok := fields["weight"]; ok && (!isInt(w) || num(w) < 1 || num(w) > 10000) {
				return nil, fmt.Errorf("layer %q: weight %v", name, w)
			}
			if s, ok := fields["slice_us"]; ok && (!isInt(s) || num(s) < 0) {
				return nil, fmt.Errorf("layer %q: slice_us %v", name, s)
			}
			for _, b := range []string{"preempt", "exclusive"} {
				if x, ok := fields[b]; ok {
					if _, ok := x.(bool); !ok {
						return nil, fmt.Errorf("layer %q: %s %v", name, b, x)
					}
				}
			}
			if g, ok := fields["growth_algo"]; ok && !slices.Contains(layeredGrowth, fmt.Sprint(g)) {
				return nil, fmt.Errorf("layer %q: growth_algo %v", name, g)
			}
		}
		layers = append(layers, v)
	}
	if tpc := shape.SMTWidth(); exclusiveCPUs > 0 && shape.LogicalCPUs > 0 && exclusiveCPUs > shape.LogicalCPUs-tpc {
		return nil, fmt.Errorf("exclusive layers take %d of %d CPUs: no core left shared", exclusiveCPUs, shape.LogicalCPUs)
	}
	return layers, nil
}

func checkCondition(k string, v any) error {
	switch {
	case slices.Contains(layeredStringMatches, k):
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %v is not a string", k, v)
		}
		if strings.Contains(k, "omm") && (s == "" || len(s) > 15) {
			return fmt.Errorf("%s %q: a comm prefix is 1..15 bytes", k, s)
		}
	case slices.Contains(layeredBoolMatches, k):
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %v is not a bool", k, v)
		}
	case slices.Contains(layeredIntMatches, k):
		if !isInt(v) {
			return fmt.Errorf("%s: %v is not an integer", k, v)
		}
	case slices.Contains(layeredOtherMatches, k):
	default:
		return fmt.Errorf("unknown match kind %q", k)
	}
	return nil
}

func num(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := n.Float64()
	return f
}

func isInt(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	_, err := n.Int64()
	return err == nil
}

// layerOfThread is the layer scx_layered would put t in: the first whose
// OR blocks have one whose conditions all hold.
func layerOfThread(layers []vLayer, t profiles.Thread) (int, error) {
	for i, l := range layers {
		for _, block := range l.ors {
			all := true
			for _, c := range block {
				for k, v := range c {
					ok, err := holds(k, v, t)
					if err != nil {
						return 0, err
					}
					all = all && ok
				}
			}
			if all {
				return i, nil
			}
		}
	}
	return -1, nil
}

func holds(k string, v any, t profiles.Thread) (bool, error) {
	switch k {
	case "CommPrefix":
		return strings.HasPrefix(t.Comm, v.(string)), nil
	case "CommPrefixExclude":
		return !strings.HasPrefix(t.Comm, v.(string)), nil
	case "PcommPrefix":
		return strings.HasPrefix(t.Pcomm, v.(string)), nil
	case "PcommPrefixExclude":
		return !strings.HasPrefix(t.Pcomm, v.(string)), nil
	case "IsGroupLeader":
		return t.Leader() == v.(bool), nil
	case "CgroupPrefix":
		return strings.HasPrefix(t.Cgroup, v.(string)), nil
	}
	return false, fmt.Errorf("the simulator does not evaluate %s", k)
}

// checkLayeredEquivalent validates the export of p and checks that every
// analysed thread lands in the layer of the group the profile gives it.
func checkLayeredEquivalent(t testing.TB, a *analyze.Analysis, p *profiles.Profile, data []byte) {
	t.Helper()
	layers, err := validateLayered(data, p.MachineShape)
	if err != nil {
		t.Fatalf("invalid scx_layered spec: %v\n%s", err, data)
	}
	c, err := profiles.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range a.Threads {
		if th.Kernel {
			continue
		}
		pt := profiles.Thread{Tid: int(th.Tid), Tgid: int(th.Tgid), Comm: kernelComm(th.Comm), Pcomm: kernelComm(th.Process), Cmdline: th.Cmdline}
		g := c.Group(pt)
		l, err := layerOfThread(layers, pt)
		if err != nil {
			t.Fatal(err)
		}
		want := g
		if g < 0 {
			want = len(layers) - 1
		}
		if l != want {
			t.Fatalf("thread %d %q: profile group %d, scx_layered layer %d", th.Tid, th.Comm, g, l)
		}
	}
}

func TestLayeredSpec(t *testing.T) {
	r, err := Profile(inference(), Options{ID: "llama", Shape: &profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2}, RequestMillicores: 2250, NodeBusyCPUs: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	data, err := LayeredSpec(r.Profile)
	if err != nil {
		t.Fatal(err)
	}
	checkLayeredEquivalent(t, inference(), r.Profile, data)
	var spec []map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	conf := spec[0]["kind"].(map[string]any)["Confined"].(map[string]any)
	if fmt.Sprint(conf["cpus_range"]) != "[4 4]" || conf["exclusive"] != true || conf["growth_algo"] != "Reverse" {
		t.Errorf("exclusive layer: 2 cores × SMT2 should be cpus_range [4 4], exclusive: %v", conf)
	}
	open := spec[1]["kind"].(map[string]any)["Open"].(map[string]any)
	// The catch-all holds llama-server's main thread, so it is normal.
	if open["weight"] != float64(100) {
		t.Errorf("normal layer: %v", open)
	}

	// Every kind of matcher that scx_layered has, crossed as it must be.
	p := &profiles.Profile{SchemaVersion: 1, ID: "x", MachineShape: profiles.Shape{LogicalCPUs: 4, Cores: 4, ThreadsPerCore: 1}}
	yes := true
	p.ThreadGroups = []profiles.ThreadGroup{
		{Name: "lat", Treatment: profiles.Latency, Preempt: true, Match: profiles.Match{
			CommPrefix: []string{"a", "b"}, PcommPrefix: []string{"srv", "svc"}, ExcludePrefix: []string{"ab", "ba"}, GroupLeader: &yes}},
		{Name: "cg", Treatment: profiles.Batch, Match: profiles.Match{CgroupPrefix: "kubepods/", ExcludePrefix: []string{"x"}}},
	}
	data, err = LayeredSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := validateLayered(data, p.MachineShape)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(layers) != 3 || len(layers[0].ors) != 4 || len(layers[0].ors[0]) != 5 || layers[2].name != layeredUnprofiled {
		t.Errorf("want 2×2 OR blocks of 5 conditions and a terminal unprofiled layer:\n%s", data)
	}
	for _, c := range []struct {
		th   profiles.Thread
		want int
	}{
		{profiles.Thread{Tid: 1, Tgid: 1, Comm: "a1", Pcomm: "srv"}, 0},
		{profiles.Thread{Tid: 2, Tgid: 1, Comm: "a1", Pcomm: "srv"}, 2},                       // not a leader
		{profiles.Thread{Tid: 1, Tgid: 1, Comm: "ab", Pcomm: "svc"}, 2},                       // excluded
		{profiles.Thread{Tid: 1, Tgid: 1, Comm: "b", Pcomm: "other"}, 2},                      // another process
		{profiles.Thread{Tid: 5, Tgid: 1, Comm: "q", Pcomm: "p", Cgroup: "kubepods/pod1"}, 1}, // cgroup
	} {
		if got, _ := layerOfThread(layers, c.th); got != c.want {
			t.Errorf("%+v: layer %d, want %d", c.th, got, c.want)
		}
	}
}

func TestLayeredSpecErrors(t *testing.T) {
	base := func(groups ...profiles.ThreadGroup) *profiles.Profile {
		return &profiles.Profile{SchemaVersion: 1, ID: "x", MachineShape: profiles.Shape{LogicalCPUs: 8, Cores: 4, ThreadsPerCore: 2},
			ThreadGroups: append(groups, profiles.ThreadGroup{Name: "rest", Treatment: profiles.Yield, Match: profiles.Match{All: true}})}
	}
	many := base()
	for i := range 16 {
		many.ThreadGroups = append([]profiles.ThreadGroup{{Name: fmt.Sprintf("g%d", i), Treatment: profiles.Normal,
			Match: profiles.Match{CommPrefix: []string{fmt.Sprintf("t%d-", i)}}}}, many.ThreadGroups...)
	}
	var excl []string
	for i := range 30 {
		excl = append(excl, fmt.Sprintf("x%d", i))
	}
	cases := []struct {
		name string
		p    *profiles.Profile
		want string
	}{
		{"comm regex", base(profiles.ThreadGroup{Name: "ib", Treatment: profiles.Latency, Match: profiles.Match{CommRegex: "^ib_"}}),
			`group "ib": comm_regex "^ib_": scx_layered has no comm regex matcher`},
		{"cmdline", base(profiles.ThreadGroup{Name: "wal", Treatment: profiles.Latency, Match: profiles.Match{CmdlinePrefix: []string{"postgres: walwriter"}}}),
			`group "wal": cmdline_prefix ["postgres: walwriter"]: scx_layered cannot match a command line`},
		{"17 layers", many, "17 layers"},
		{"long prefix", base(profiles.ThreadGroup{Name: "l", Treatment: profiles.Latency, Match: profiles.Match{CommPrefix: []string{"sixteen-bytes-xx"}}}),
			`comm_prefix "sixteen-bytes-xx" is 16 bytes`},
		{"empty prefix", base(profiles.ThreadGroup{Name: "e", Treatment: profiles.Latency, Match: profiles.Match{CommPrefix: []string{""}}}),
			`group "e": comm_prefix "": an empty prefix is every task`},
		{"too many excludes", base(profiles.ThreadGroup{Name: "x", Treatment: profiles.Latency, Match: profiles.Match{CommPrefix: []string{"a"}, ExcludePrefix: excl}}),
			"31 conditions in one AND block"},
		{"catch-all before the end", base(profiles.ThreadGroup{Name: "all", Treatment: profiles.Latency, Match: profiles.Match{All: true}}),
			`group "all" (layer 0) matches every task but is not last`},
		{"exclusive without SMT width", &profiles.Profile{SchemaVersion: 1, ID: "x", MachineShape: profiles.Shape{Cores: 4},
			ThreadGroups: []profiles.ThreadGroup{{Name: "c", Treatment: profiles.Exclusive, ExclusiveCores: 1, Match: profiles.Match{CommPrefix: []string{"c"}}},
				{Name: "rest", Treatment: profiles.Yield, Match: profiles.Match{All: true}}}}, "scx_layered's cpus_range counts logical CPUs"},
		{"no groups", &profiles.Profile{ID: "x"}, "no thread groups"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LayeredSpec(c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line containing %q", err, c.want)
			}
		})
	}
}
