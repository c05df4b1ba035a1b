package scx

import (
	"fmt"
	"strings"
	"time"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// Realise says what Apply would load into the kernel for p on topology t:
// the BPF scheduler's configuration (buildConfig), every field of it, layer
// by layer, and the order in which shared CPUs serve the layers. It
// implements scheduler.Realiser.
func (b *Backend) Realise(p *profiles.Profile, t *machine.Topology) (scheduler.Realised, error) {
	cores, err := scheduler.Allocate(p, t)
	if err != nil {
		return scheduler.Realised{}, err
	}
	c, err := buildConfig(scheduler.Plan{Profile: p, Topology: t, Cores: cores})
	if err != nil {
		return scheduler.Realised{}, err
	}
	r := scheduler.Realised{Backend: b.Name()}
	def := c.DefaultLayer()
	r.Settings = append(r.Settings,
		scheduler.Setting{Name: "order", Value: c.orderString()},
		scheduler.Setting{Name: "default_layer", Value: layerSettings(c.Layers[def], nil)})
	for i, g := range p.ThreadGroups {
		rg := scheduler.RealisedGroup{Name: g.Name, Match: g.Match}
		for _, s := range strings.Fields(layerSettings(c.Layers[i], cores.Exclusive[i])) {
			name, value, _ := strings.Cut(s, "=")
			rg.Settings = append(rg.Settings, scheduler.Setting{Name: name, Value: value})
		}
		if g.RTPriority != 0 {
			rg.Notes = append(rg.Notes, fmt.Sprintf("rt_priority %d not applied: the sched_ext backend schedules every group in its own class", g.RTPriority))
		}
		if g.Treatment == profiles.Batch {
			rg.Notes = append(rg.Notes, fmt.Sprintf("batch is a normal layer with a %v slice: its weighted share of the vtime queue, as SCHED_BATCH keeps its fair share under CFS", time.Duration(c.Layers[i].SliceNs)))
		}
		r.Groups = append(r.Groups, rg)
	}
	return r, nil
}

// layerSettings spells a layer's configuration as name=value fields; owned
// are the CPUs an exclusive layer owns (every SMT sibling), nil otherwise.
func layerSettings(l layerConfig, owned []int) string {
	s := fmt.Sprintf("treatment=%s weight=%d slice=%v preempt=%t", treatmentName(l.Treatment), l.Weight, time.Duration(l.SliceNs), l.Preempt != 0)
	if owned != nil {
		s += " cpus=" + machine.FormatCPUList(owned)
	}
	return s
}

// orderString names the DSQs shared CPUs consume, in order: layers by
// index, the normal DSQ as "normal".
func (c *config) orderString() string {
	var parts []string
	for _, d := range c.Order {
		if d == normalDSQ {
			parts = append(parts, "normal")
			continue
		}
		if c.Tier >= 0 && d == layerDSQBase+uint64(c.Tier) {
			parts = append(parts, "besteffort")
			continue
		}
		parts = append(parts, fmt.Sprintf("layer%d", d-layerDSQBase))
	}
	return strings.Join(parts, ",")
}

// treatmentName is the layer kind a code stands for: a batch group's layer
// is a normal one.
func treatmentName(code uint32) string {
	switch code {
	case tsExclusive:
		return string(profiles.Exclusive)
	case tsLatency:
		return string(profiles.Latency)
	case tsNormal:
		return string(profiles.Normal)
	case tsYield:
		return string(profiles.Yield)
	case tsBestEffort:
		return string(BestEffortTreatment)
	}
	return fmt.Sprint(code)
}

var _ scheduler.Realiser = (*Backend)(nil)
