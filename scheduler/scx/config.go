package scx

import (
	"fmt"
	"slices"
	"time"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// Limits of the BPF side (bpf/scheduler.h).
const (
	maxLayers    = 32 // TS_MAX_LAYERS: thread groups + the default layer
	maxCPUs      = 1024
	maxLayerCPUs = 64
	maxSiblings  = 3
	noCPU        = 0xffffffff
	noLayer      = 0xffffffff
	layerDSQBase = 0x1000
	normalDSQ    = 0x2000
)

// Treatment codes of enum ts_treatment.
const (
	tsExclusive  uint32 = 1
	tsLatency    uint32 = 2
	tsNormal     uint32 = 3
	tsYield      uint32 = 5
	tsBestEffort uint32 = 6 // the tier's layer, not a profile treatment
)

// BestEffortLayer names, in Stats, the tier's layer: the tasks under
// Backend.BestEffort's cgroup that the target does not hold.
const BestEffortLayer = "(besteffort)"

// BestEffortTreatment is the tier layer's treatment in Stats: no profile
// treatment, below yield.
const BestEffortTreatment profiles.Treatment = "besteffort"

// treatmentCode is the layer a group of each treatment gets. A batch group
// is a normal layer with batch's long slice: it keeps its weighted share of
// the vtime queue, as a SCHED_BATCH thread keeps its fair share under CFS.
// A layer of its own served only when no normal work waits (as yield's is)
// starved it behind any busy normal thread, and whoever waited on it with
// it: a profile trained on CFS would not have meant the same on sched_ext.
var treatmentCode = map[profiles.Treatment]uint32{
	profiles.Exclusive: tsExclusive,
	profiles.Latency:   tsLatency,
	profiles.Normal:    tsNormal,
	profiles.Batch:     tsNormal,
	profiles.Yield:     tsYield,
}

// DefaultSlice is the slice a layer gets when its group sets no slice_us:
// short for latency (a runaway wakeup handler cannot hold a CPU long), long
// for batch (fewer switches for throughput work), the kernel's default
// (SCX_SLICE_DFL) otherwise.
func DefaultSlice(t profiles.Treatment) time.Duration {
	switch t {
	case profiles.Latency:
		return 2 * time.Millisecond
	case profiles.Batch:
		return 40 * time.Millisecond
	case profiles.Yield:
		return 5 * time.Millisecond
	}
	return 20 * time.Millisecond
}

// layerConfig mirrors struct ts_layer.
type layerConfig struct {
	Treatment uint32
	Weight    uint32
	SliceNs   uint64
	Preempt   uint32
	NrCPUs    uint32
	CPUs      [maxLayerCPUs]uint32
}

// cpuConfig mirrors struct ts_cpu.
type cpuConfig struct {
	Owner    uint32
	Primary  uint32
	Siblings [maxSiblings]uint32
	Pad      uint32
}

// stats mirrors struct ts_stats.
type stats struct {
	RuntimeNs   uint64
	Dispatches  uint64
	Preemptions uint64
	SiblingBusy uint64
	Enqueues    uint64
}

// config is what the BPF scheduler is loaded with: one layer per thread
// group then the default layer, each CPU's role, and the order in which
// shared CPUs consume the layers' DSQs.
type config struct {
	Names      []string // per layer; the default layer is scheduler.Unmatched
	Treatments []profiles.Treatment
	Layers     []layerConfig
	CPUs       []cpuConfig // indexed by CPU id, len = highest CPU + 1
	Order      []uint64    // DSQ ids
	// Default is the layer of the target's threads no group matches (and
	// of every task outside the target but the tier's): the last one.
	Default int
	// Tier is the BestEffort layer, between the groups and the default
	// one; -1: no tier.
	Tier int
}

// DefaultLayer is the index of the layer for threads no group matches.
func (c *config) DefaultLayer() int { return c.Default }

// addTier adds the tier's layer (Backend.BestEffort) before the default
// one, which stays last: consumed after every other, the yield
// treatment's slice. The default layer has no DSQ of its own (it shares
// the normal one), so moving it renames no DSQ.
func (c *config) addTier() {
	c.Tier = c.Default
	c.Names = slices.Insert(c.Names, c.Tier, BestEffortLayer)
	c.Treatments = slices.Insert(c.Treatments, c.Tier, BestEffortTreatment)
	c.Layers = slices.Insert(c.Layers, c.Tier, layerConfig{Treatment: tsBestEffort, Weight: 100, SliceNs: uint64(DefaultSlice(profiles.Yield))})
	c.Default++
	c.Order = append(c.Order, layerDSQBase+uint64(c.Tier))
}

// buildConfig turns a plan into the scheduler's configuration. Exclusive
// groups run on one CPU (the primary: the lowest-numbered) of each core
// they own; its other hyperthreads are owned too but stay idle.
func buildConfig(p scheduler.Plan) (*config, error) {
	if p.Profile == nil {
		return nil, fmt.Errorf("plan has no profile")
	}
	if p.Topology == nil || len(p.Topology.CPUs) == 0 {
		return nil, fmt.Errorf("plan has no CPU topology")
	}
	groups := p.Profile.ThreadGroups
	if len(groups)+1 > maxLayers {
		return nil, fmt.Errorf("profile %s: %d thread groups; the sched_ext backend takes at most %d", p.Profile.ID, len(groups), maxLayers-1)
	}
	ncpu := 0
	for _, c := range p.Topology.CPUs {
		ncpu = max(ncpu, c.ID+1)
	}
	if ncpu > maxCPUs {
		return nil, fmt.Errorf("%d CPUs: the sched_ext backend takes at most %d", ncpu, maxCPUs)
	}
	c := &config{CPUs: make([]cpuConfig, ncpu), Tier: -1}
	for i := range c.CPUs {
		c.CPUs[i].Owner = noLayer
		c.CPUs[i].Siblings = [maxSiblings]uint32{noCPU, noCPU, noCPU}
	}
	for _, cpu := range p.Topology.CPUs {
		n := 0
		for _, s := range cpu.Siblings {
			if s == cpu.ID {
				continue
			}
			if n == maxSiblings {
				return nil, fmt.Errorf("CPU %d has %d SMT siblings; the sched_ext backend takes at most %d", cpu.ID, len(cpu.Siblings)-1, maxSiblings)
			}
			c.CPUs[cpu.ID].Siblings[n] = uint32(s)
			n++
		}
	}

	for i, g := range groups {
		code, ok := treatmentCode[g.Treatment]
		if !ok {
			return nil, fmt.Errorf("thread group %q: unknown treatment %q", g.Name, g.Treatment)
		}
		l := layerConfig{Treatment: code, Weight: uint32(g.Weight), SliceNs: uint64(DefaultSlice(g.Treatment))}
		if g.SliceUs > 0 {
			l.SliceNs = uint64(g.SliceUs) * 1000
		}
		if g.Weight == 0 {
			l.Weight = 100
		}
		if g.Preempt {
			l.Preempt = 1
		}
		if g.Treatment == profiles.Exclusive {
			var owned []int
			if i < len(p.Cores.Exclusive) {
				owned = p.Cores.Exclusive[i]
			}
			if len(owned) == 0 {
				return nil, fmt.Errorf("thread group %q: exclusive but the plan allocates it no cores", g.Name)
			}
			for _, cpu := range owned {
				if cpu < 0 || cpu >= ncpu {
					return nil, fmt.Errorf("thread group %q: CPU %d is not in the topology", g.Name, cpu)
				}
				if c.CPUs[cpu].Owner != noLayer {
					return nil, fmt.Errorf("thread group %q: CPU %d is already owned by %q", g.Name, cpu, groups[c.CPUs[cpu].Owner].Name)
				}
				c.CPUs[cpu].Owner = uint32(i)
			}
			// The primary of each owned core is its lowest CPU; the
			// allocation hands out whole cores, so every sibling is owned.
			for _, cpu := range owned {
				if primary(p, cpu) != cpu {
					continue
				}
				for _, s := range p.Topology.CPUs[cpuIndex(p, cpu)].Siblings {
					if c.CPUs[s].Owner != uint32(i) {
						return nil, fmt.Errorf("thread group %q: owns CPU %d but not its SMT sibling %d (cores are allocated whole)", g.Name, cpu, s)
					}
				}
				if l.NrCPUs == maxLayerCPUs {
					return nil, fmt.Errorf("thread group %q: more than %d exclusive cores", g.Name, maxLayerCPUs)
				}
				l.CPUs[l.NrCPUs] = uint32(cpu)
				l.NrCPUs++
				c.CPUs[cpu].Primary = 1
			}
		}
		c.Names = append(c.Names, g.Name)
		c.Treatments = append(c.Treatments, g.Treatment)
		c.Layers = append(c.Layers, l)
	}
	c.Default = len(c.Layers)
	c.Names = append(c.Names, scheduler.Unmatched)
	c.Treatments = append(c.Treatments, profiles.Normal)
	c.Layers = append(c.Layers, layerConfig{Treatment: tsNormal, Weight: 100, SliceNs: uint64(DefaultSlice(profiles.Normal))})

	shared := 0
	for _, cpu := range c.CPUs {
		if cpu.Owner == noLayer {
			shared++
		}
	}
	if shared == 0 {
		return nil, fmt.Errorf("no shared CPU left: exclusive groups own every core")
	}

	// Shared CPUs consume latency layers first, then the normal DSQ (batch
	// groups' layers included), then yield layers; groups of one treatment
	// in profile order.
	for _, t := range []uint32{tsLatency, tsNormal, tsYield} {
		if t == tsNormal {
			c.Order = append(c.Order, normalDSQ)
			continue
		}
		for i, l := range c.Layers {
			if l.Treatment == t {
				c.Order = append(c.Order, layerDSQBase+uint64(i))
			}
		}
	}
	return c, nil
}

// cpuIndex returns the index of CPU id in the plan's topology.
func cpuIndex(p scheduler.Plan, id int) int {
	return slices.IndexFunc(p.Topology.CPUs, func(c machine.CPU) bool { return c.ID == id })
}

// primary returns the lowest CPU among cpu's SMT siblings.
func primary(p scheduler.Plan, cpu int) int {
	i := cpuIndex(p, cpu)
	if i < 0 || len(p.Topology.CPUs[i].Siblings) == 0 {
		return cpu
	}
	return slices.Min(p.Topology.CPUs[i].Siblings)
}

// assign classifies threads into layers: a matched group's index, or the
// default layer for the target's threads no group matches.
func (c *config) assign(cl *profiles.Classifier, threads []profiles.Thread) map[uint32]uint32 {
	m := make(map[uint32]uint32, len(threads))
	for _, t := range threads {
		g := cl.Group(t)
		if g < 0 || g >= c.DefaultLayer() {
			g = c.DefaultLayer()
		}
		m[uint32(t.Tid)] = uint32(g)
	}
	return m
}
