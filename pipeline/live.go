package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/rig"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/scx"
	"temper.codes/temper-train/target"
)

// Live is a workload measured live on this machine: the backend that
// applies profiles to it, the target and the benchmark that measures it.
// Refine and the canary loop build refine's environment from it.
type Live struct {
	Backend  scheduler.Backend
	Topology *machine.Topology
	Shape    machine.Shape
	Target   *target.Target
	Bench    bench.Command // with its Timeout; Dir is set per trial
	// Version is temper-train's, recorded in ledger headers.
	Version string
	// Rig is the node-shaped rig the target and the client run in; nil
	// when they run where temper-train does.
	Rig *rig.Rig
	// Log and Progress receive refine's lines and state (nil: none).
	Log      func(format string, args ...any)
	Progress func(refine.Progress)

	openLoop atomic.Bool
	// tierOn is the tier switch of a backend whose scheduler has the tier
	// (scheduler.Tiered): liveScheduler applies with it while it is set.
	tierOn atomic.Bool
}

// NewLive reads this machine's topology for a live workload.
func NewLive(backend scheduler.Backend, tgt *target.Target, bc bench.Command) (*Live, error) {
	topo, shape, err := thisMachine()
	if err != nil {
		return nil, err
	}
	return &Live{Backend: backend, Topology: topo, Shape: shape, Target: tgt, Bench: bc}, nil
}

// thisMachine reads the CPU topology and shape.
func thisMachine() (*machine.Topology, machine.Shape, error) {
	topo, err := machine.ReadTopology("/")
	if err != nil {
		return nil, machine.Shape{}, fmt.Errorf("CPU topology: %w", err)
	}
	shape, err := machine.ShapeOf(topo)
	if err != nil {
		return nil, machine.Shape{}, fmt.Errorf("machine shape: %w", err)
	}
	return topo, shape, nil
}

// Lint checks a profile for the backend and this machine, on CFS for the
// target's cgroup (rt_priority where it has no RT runtime is an error),
// and against the rig's pod limit (exclusive cores above it warn).
func (l *Live) Lint(p *profiles.Profile) []profiles.Finding {
	o := profiles.LintOptions{Backend: l.Backend.Name(), Shape: &l.Shape}
	if l.Backend.Name() == cfs.Name && l.Target != nil && len(l.Target.Tgids) > 0 {
		if rt, err := cfs.RTRuntimeOf("", l.Target.Tgids[0]); err == nil {
			o.RTRuntime = rt
		}
	}
	// The rig's pod limit bounds what exclusive cores a profile may own.
	if l.Rig != nil {
		if st, err := l.Rig.PodCPU(); err == nil && st.Limit > 0 {
			o.LimitMillicores = int(math.Round(1000 * st.Limit))
		}
	}
	return profiles.Lint(p, o)
}

// Realise is the kernel state p puts the target in on the backend, as a
// key: two profiles with one key are one arm. "" and no error when the
// backend cannot say.
func (l *Live) Realise(p *profiles.Profile) (string, error) {
	r, ok := l.Backend.(scheduler.Realiser)
	if !ok {
		return "", nil
	}
	rs, err := r.Realise(p, l.Topology)
	if err != nil {
		return "", err
	}
	return rs.Key(), nil
}

// TierArm says whether a new run measures the tier arm: with a rig whose
// backend has a tier (l.tier), unless noTier. note says why not where a
// rig has none.
func (l *Live) TierArm(noTier bool, note func(string)) bool {
	switch {
	case l.Rig == nil || noTier:
		return false
	case l.tier() == nil:
		note(fmt.Sprintf("no tier arm on the %s backend: it has no treatment of BestEffort pods to switch", l.Backend.Name()))
		return false
	}
	return true
}

// OpenLoop says whether the benchmark's last run was open-loop.
func (l *Live) OpenLoop() bool { return l.openLoop.Load() }

// Env is refine's environment on this workload, recording to lw, each
// trial's scratch directory under trialDir. The caller sets Reference and
// a resumed run's Done, Started and StartTimes.
func (l *Live) Env(lw *ledger.Writer, trialDir string) refine.Env {
	return refine.Env{
		Scheduler: l.Scheduler(),
		Lint:      l.Lint,
		Ledger:    lw,
		TrialDir:  trialDir,
		Log:       l.Log,
		Progress:  l.Progress,
		Bench: func(ctx context.Context, dir string) (map[string]float64, error) {
			c := l.Bench
			c.Dir = dir
			r, err := bench.Run(ctx, c)
			if err != nil {
				return nil, err
			}
			l.openLoop.Store(r.OpenLoop)
			return r.Metrics, nil
		},
		Background: l.background,
		Realise:    l.Realise,
		Tier:       l.tier(),
		TierWhat:   refine.TierDesc(l.Backend.Name()),
		Usage:      l.usage(),
	}
}

// usage reads the rig's pod cgroup, for the quota parity table; nil
// without a rig.
func (l *Live) usage() func() (cgroup.CPUStat, error) {
	if l.Rig == nil {
		return nil
	}
	return l.Rig.PodCPU
}

// background starts n spinners: as a BestEffort pod of the rig, or in a
// cgroup of their own at the lowest weight.
func (l *Live) background(n int) (refine.Spinners, error) {
	if l.Rig != nil {
		return background.StartIn(l.Rig.BestEffort(), n)
	}
	return background.Start(n)
}

// tier is the one rule of how the node's tier is switched (refine's
// Env.Tier): on CFS the rig's besteffort parent made an idle entity
// (rig.Rig.Tier, a cgroup knob, whatever is applied); on a backend whose
// scheduler has the tier (scheduler.Tiered: sched_ext) the flag every
// Apply of liveScheduler reads, so that each arm's scheduler is loaded
// with the tier or without it (the engine stops an arm before it switches
// the tier, and switches it before it applies the next). nil without a
// rig, or on a backend with neither.
func (l *Live) tier() func(bool) error {
	switch {
	case l.Rig == nil:
		return nil
	case l.Backend.Name() == cfs.Name:
		return l.Rig.Tier
	case l.tiered() != nil:
		return func(on bool) error {
			l.tierOn.Store(on)
			return nil
		}
	}
	return nil
}

// tiered is the backend when its scheduler has the tier itself
// (scheduler.Tiered) and there is a rig whose BestEffort pods it treats;
// nil otherwise.
func (l *Live) tiered() scheduler.Tiered {
	if t, ok := l.Backend.(scheduler.Tiered); ok && l.Rig != nil {
		return t
	}
	return nil
}

// Scheduler applies profiles to the target through the backend, as
// refine's arms.
func (l *Live) Scheduler() refine.Scheduler {
	s := &liveScheduler{backend: l.Backend, topo: l.Topology, tgt: l.Target}
	if t := l.tiered(); t != nil {
		s.tiered, s.tierOn, s.besteffort = t, &l.tierOn, l.Rig.BestEffort().CPU
	}
	return s
}

// Header is a ledger's first line for a run of cfg on this workload:
// profile names what is refined (a path, or what a canary cycle is),
// profileHash and commit identify it.
func (l *Live) Header(profile, profileHash, commit string, cfg refine.Config) ledger.Header {
	raw, _ := json.Marshal(cfg)
	tools := bench.ToolVersions(l.Bench)
	tools["temper-train"] = l.Version
	adapter := ""
	if l.Bench.Adapter != nil {
		adapter = l.Bench.Adapter.Name()
	}
	return ledger.Header{Start: time.Now().UTC(), Profile: profile, ProfileHash: profileHash, ProfileCommit: commit,
		Machine: machine.Identify(l.Shape), Backend: l.Backend.Name(), Tools: tools, Command: os.Args, Bench: l.Bench.Argv,
		Adapter: adapter, Target: l.Target.Identity, Seed: cfg.Seed, Config: raw, Rig: l.rigLines(), NoCeilings: l.noCeilings()}
}

// noCeilings says whether the backend runs without its per-pod CPU
// ceilings (WithoutCeilings).
func (l *Live) noCeilings() bool {
	s, ok := l.Backend.(*scx.Backend)
	return ok && s.NoCeilings
}

// watchOnly is the profile a CFS arm without a profile runs: every thread
// normal, no slice, no nice, nothing the CFS backend changes.
func watchOnly() *profiles.Profile {
	return &profiles.Profile{SchemaVersion: 1, ID: "stock",
		ThreadGroups: []profiles.ThreadGroup{{Name: "all", Match: profiles.Match{All: true}, Treatment: profiles.Normal}}}
}

// tierOnly is the profile the tier-only arm runs on a backend whose
// scheduler has the tier: no group, so every thread of the target is in
// the default layer, as every other task but the BestEffort pods'.
func tierOnly() *profiles.Profile {
	return &profiles.Profile{SchemaVersion: 1, ID: "tier-only"}
}

// ErrTargetGone is wrapped when the target has no process left.
var ErrTargetGone = errors.New("the target exited")

// liveScheduler applies refine's arms to the target through a scheduler
// backend: each arm is a scheduler.Session, the library call apply uses.
type liveScheduler struct {
	backend scheduler.Backend
	topo    *machine.Topology
	tgt     *target.Target
	// tiered, with the tier switch tierOn, is backend when its scheduler
	// has the tier, for the rig's besteffort cgroup directory; nil
	// otherwise.
	tiered     scheduler.Tiered
	tierOn     *atomic.Bool
	besteffort string
}

func (s *liveScheduler) Apply(ctx context.Context, p *profiles.Profile) (refine.Session, error) {
	backend := s.backend
	if s.tiered != nil && s.tierOn.Load() {
		backend = s.tiered.WithTier(s.besteffort)
		if p == nil {
			// Tier only: the scheduler with no group, its tier in force.
			p = tierOnly()
		}
	}
	if p == nil {
		if backend.Name() != cfs.Name {
			// Stock under sched_ext is no scheduler attached at all.
			return nil, nil
		}
		// Stock on CFS: the same session as a profile's, which changes
		// nothing (one normal group) but refreshes the target as often.
		p = watchOnly()
	}
	plan, err := scheduler.NewPlan(p, s.topo, func() ([]profiles.Thread, error) {
		ids, err := s.tgt.Refresh()
		if err != nil {
			return nil, err
		}
		return scheduler.ListThreads(ids)
	})
	if err != nil {
		return nil, err
	}
	sess, err := scheduler.Start(ctx, backend, plan, scheduler.Options{})
	if err != nil {
		return nil, flat(err)
	}
	if a, ok := sess.Applied().(*scx.Applied); ok {
		return ceilingSession{liveSession{sess}, a}, nil
	}
	return liveSession{sess}, nil
}

// Alive fails when the target has no process left.
func (s *liveScheduler) Alive() error {
	ids, err := s.tgt.Refresh()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s has no process left", ErrTargetGone, s.tgt.Description)
	}
	return nil
}

// liveSession is a scheduler.Session as refine uses it: Stop reports only
// whether everything was reverted.
type liveSession struct{ s *scheduler.Session }

func (l liveSession) Stats() ([]scheduler.GroupStats, error) { return l.s.Stats() }

func (l liveSession) Stop() error {
	sum := l.s.Stop()
	if sum.RevertErr != nil {
		return sum.RevertErr
	}
	if sum.Reason == scheduler.Failed {
		return fmt.Errorf("keeping the profile in force: %w", sum.Err)
	}
	return nil
}

// ceilingSession is a liveSession of the sched_ext backend, which runs the
// target outside CFS bandwidth control: refine records the ceiling it
// held the pod to (refine.Ceilinged).
type ceilingSession struct {
	liveSession
	applied *scx.Applied
}

// Ceiling is the tightest of the ceilings in force, in CPUs; 0 with none
// (Backend.NoCeilings, or no limited cgroup above the target's threads).
func (c ceilingSession) Ceiling() (float64, error) {
	cs, err := c.applied.Ceilings()
	if err != nil {
		return 0, err
	}
	return tightest(cs), nil
}

// tightest is the smallest of the ceilings in CPUs, 0 for none: a thread
// draws on every ceiling above it, so the tightest is the one that binds.
func tightest(cs []scx.CeilingStats) float64 {
	var least float64
	for _, c := range cs {
		if v := c.CPUs(); v > 0 && (least == 0 || v < least) {
			least = v
		}
	}
	return least
}

func (l *Live) rigLines() []string {
	if l.Rig == nil {
		return nil
	}
	return l.Rig.Describe()
}
