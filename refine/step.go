package refine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"temper.codes/temper-train/profiles"
)

// StockHash names the arm with no profile: stock CFS.
const StockHash = "stock"

// Arm is one side of a comparison: a profile in force, or none (stock).
type Arm struct {
	Profile *profiles.Profile // nil: stock, no profile applied
	Hash    string            // StockHash, or the first 12 hex digits of the profile's TOML sha256
	Step    Step              // what distinguishes it from the profile it was derived from
	// Tier is set when the node's tier (Env.Tier) is in force with the
	// profile: the seeds' "tier only" arm has no profile, "tier + profile"
	// has one.
	Tier bool
}

// TierSuffix marks an arm's Key when the tier is in force with it.
const TierSuffix = "+tier"

// Key identifies the arm's kernel state in the ledger (a trial's
// Candidate): the profile's hash, with TierSuffix when the tier is in force.
func (a Arm) Key() string {
	if a.Tier {
		return a.Hash + TierSuffix
	}
	return a.Hash
}

// WithTier is a with the tier in force.
func (a Arm) WithTier() Arm {
	a.Tier = true
	return a
}

// NewArm returns the arm for p (nil: stock).
func NewArm(p *profiles.Profile, s Step) (Arm, error) {
	if p == nil {
		return Arm{Hash: StockHash, Step: s}, nil
	}
	h, err := Hash(p)
	if err != nil {
		return Arm{}, err
	}
	return Arm{Profile: p, Hash: h, Step: s}, nil
}

// Hash is the identity of a profile's content: its TOML's sha256, short.
func Hash(p *profiles.Profile) (string, error) {
	b, err := profiles.Marshal(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6]), nil
}

// Step is one parameter changed in one group: a hill-climbing move.
type Step struct {
	Group string // the group the step changes ("" for a whole-profile arm)
	Param string // treatment, exclusive_cores, slice_us, weight, preempt, family
	From  string
	To    string
	// Favour says what the step does to the group: +1 favours it more
	// (expect fewer involuntary preemptions), -1 less (expect more), 0 no
	// prediction. The mechanism check reads it.
	Favour int8
}

func (s Step) String() string {
	switch {
	case s.Group == "":
		return s.Param
	case s.Param == "family":
		return fmt.Sprintf("group %q: family %s moved out", s.Group, s.From)
	}
	return fmt.Sprintf("group %q: %s %s → %s", s.Group, s.Param, s.From, s.To)
}

// rank orders treatments from most (0) to least favoured.
func rank(t profiles.Treatment) int { return slices.Index(profiles.Treatments(), t) }

// Candidates returns every one-parameter neighbour of p, in a stable order,
// linted with lint: those with a lint error are returned in rejected with
// the first error, never to be applied. The moves follow the schema's
// bounds: treatments one step towards normal ("relax") and straight to
// normal ("drop": the move for a group that helps under load and hurts at
// idle), one step more favoured; exclusive cores ±1 with cpu_fraction
// rewritten as synthesize sizes it (profiles.CPUFractionFor: the largest
// fraction that gives exactly the new count within what the other exclusive
// groups leave of the request); slice_us halved and doubled within lint's
// bounds; weight halved and doubled within
// 1..10000; preempt toggled where it means something; and each family of a
// multi-family comm_prefix group moved out of it.
func Candidates(p *profiles.Profile, lint func(*profiles.Profile) []profiles.Finding) (ok []Arm, rejected []Rejected, err error) {
	var moves []move
	request := p.Traits.CPURequestMillicores
	for i, g := range p.ThreadGroups {
		leftBP := fractionLeft(p, i)
		r := rank(g.Treatment)
		normal := rank(profiles.Normal)
		if g.Treatment != profiles.Normal {
			moves = append(moves, treatmentMove(i, g, profiles.Normal))
			// relax one step towards normal when that is not normal itself
			dir := 1
			if r > normal {
				dir = -1
			}
			if t := profiles.Treatments()[r+dir]; t != profiles.Normal {
				moves = append(moves, treatmentMove(i, g, t))
			}
		}
		if r > 0 && g.Treatment != profiles.Exclusive {
			// one step more favoured; exclusive needs sizing, so only latency → exclusive is skipped
			if t := profiles.Treatments()[r-1]; t != profiles.Exclusive {
				moves = append(moves, treatmentMove(i, g, t))
			} else if bp, _, ok := profiles.CPUFractionFor(1, request, leftBP); ok {
				moves = append(moves, exclusiveMove(i, g, bp))
			}
		}
		if g.Treatment == profiles.Exclusive {
			for _, d := range []int{-1, +1} {
				n := g.ExclusiveCores + d
				if bp, _, ok := profiles.CPUFractionFor(n, request, leftBP); ok {
					moves = append(moves, coresMove(i, g, n, bp))
				} // else more cores than the request leaves: no cpu_fraction gives them
			}
		}
		if g.Treatment != profiles.Normal && g.SliceUs > 0 {
			for _, s := range []int{g.SliceUs / 2, g.SliceUs * 2} {
				if s >= profiles.MinSliceUs && s <= profiles.MaxSliceUs {
					moves = append(moves, fieldMove(i, g, "slice_us", g.SliceUs, s, func(g *profiles.ThreadGroup) { g.SliceUs = s }))
				}
			}
		}
		if g.Weight > 0 {
			for _, w := range []int{g.Weight / 2, g.Weight * 2} {
				if w >= 1 && w <= 10000 && w != g.Weight {
					moves = append(moves, fieldMove(i, g, "weight", g.Weight, w, func(g *profiles.ThreadGroup) { g.Weight = w }))
				}
			}
		}
		if g.Treatment == profiles.Latency || g.Treatment == profiles.Exclusive {
			to := !g.Preempt
			fav := int8(1)
			if !to {
				fav = -1
			}
			moves = append(moves, move{group: i, step: Step{Group: g.Name, Param: "preempt", From: fmt.Sprint(g.Preempt), To: fmt.Sprint(to), Favour: fav},
				edit: func(g *profiles.ThreadGroup) { g.Preempt = to }})
		}
		if len(g.Match.CommPrefix) > 1 {
			for _, fam := range g.Match.CommPrefix {
				moves = append(moves, move{group: i, step: Step{Group: g.Name, Param: "family", From: fam, To: "out", Favour: 0},
					edit: func(g *profiles.ThreadGroup) {
						g.Match.CommPrefix = slices.DeleteFunc(slices.Clone(g.Match.CommPrefix), func(s string) bool { return s == fam })
					}})
			}
		}
	}
	// The moves that change most first: the order in which candidates
	// are listed, noted and, on ties in a race, ranked.
	slices.SortStableFunc(moves, func(a, b move) int { return priority(a.step.Param) - priority(b.step.Param) })
	seen := map[string]bool{}
	for _, m := range moves {
		q := cloneProfile(p)
		m.edit(&q.ThreadGroups[m.group])
		arm, err := NewArm(q, m.step)
		if err != nil {
			return nil, nil, fmt.Errorf("candidate %s: %w", m.step, err)
		}
		if seen[arm.Hash] {
			continue
		}
		seen[arm.Hash] = true
		if f, bad := profiles.FirstError(lint(q)); bad {
			rejected = append(rejected, Rejected{Arm: arm, Finding: f.String()})
			continue
		}
		ok = append(ok, arm)
	}
	return ok, rejected, nil
}

// priority orders the kinds of move: treatments first, then core counts,
// preemption, weight, slice and family membership.
func priority(param string) int {
	switch param {
	case "treatment":
		return 0
	case "exclusive_cores":
		return 1
	case "preempt":
		return 2
	case "weight":
		return 3
	case "slice_us":
		return 4
	}
	return 5
}

// Rejected is a candidate lint refused: logged, never applied.
type Rejected struct {
	Arm     Arm
	Finding string
}

type move struct {
	group int
	step  Step
	edit  func(*profiles.ThreadGroup)
}

func treatmentMove(i int, g profiles.ThreadGroup, to profiles.Treatment) move {
	fav := int8(1)
	if rank(to) > rank(g.Treatment) {
		fav = -1
	}
	// Between normal and batch no direction is predicted: on sched_ext a
	// batch group is a normal layer with a longer slice (fewer slice-end
	// preemptions), on CFS SCHED_BATCH only stops its own wakeups from
	// preempting.
	if min(rank(to), rank(g.Treatment)) == rank(profiles.Normal) && max(rank(to), rank(g.Treatment)) == rank(profiles.Batch) {
		fav = 0
	}
	return move{group: i, step: Step{Group: g.Name, Param: "treatment", From: string(g.Treatment), To: string(to), Favour: fav},
		edit: func(g *profiles.ThreadGroup) {
			if g.Treatment == profiles.Exclusive {
				g.CPUFraction, g.ExclusiveCores = 0, 0
			}
			if to != profiles.Latency && to != profiles.Exclusive {
				g.Preempt = false
				g.RTPriority = 0
			}
			if to == profiles.Normal {
				g.SliceUs, g.Weight = 0, 0
			}
			g.Treatment = to
		}}
}

// fractionLeft is what the exclusive groups other than group i leave of the
// request, in ten-thousandths: the most cpu_fraction group i may take, as
// synthesize hands fractions out.
func fractionLeft(p *profiles.Profile, i int) int {
	left := 10000
	for j, g := range p.ThreadGroups {
		if j != i && g.Treatment == profiles.Exclusive {
			left -= int(math.Round(g.CPUFraction * 10000))
		}
	}
	return left
}

// coresMove sets a group's exclusive_cores to n with the cpu_fraction bp
// (ten-thousandths) that gives them.
func coresMove(i int, g profiles.ThreadGroup, n, bp int) move {
	fav := int8(1)
	if n < g.ExclusiveCores {
		fav = -1
	}
	f := float64(bp) / 10000
	return move{group: i, step: Step{Group: g.Name, Param: "exclusive_cores", From: fmt.Sprint(g.ExclusiveCores), To: fmt.Sprint(n), Favour: fav},
		edit: func(g *profiles.ThreadGroup) {
			g.ExclusiveCores = n
			g.CPUFraction = f
		}}
}

// exclusiveMove gives a group one exclusive core with the cpu_fraction bp
// (ten-thousandths) that gives it.
func exclusiveMove(i int, g profiles.ThreadGroup, bp int) move {
	f := float64(bp) / 10000
	return move{group: i, step: Step{Group: g.Name, Param: "treatment", From: string(g.Treatment), To: string(profiles.Exclusive), Favour: 1},
		edit: func(g *profiles.ThreadGroup) {
			g.Treatment = profiles.Exclusive
			g.ExclusiveCores = 1
			g.CPUFraction = f
			g.RTPriority = 0
		}}
}

func fieldMove(i int, g profiles.ThreadGroup, param string, from, to int, edit func(*profiles.ThreadGroup)) move {
	fav := int8(0)
	switch param {
	case "weight":
		fav = 1
		if to < from {
			fav = -1
		}
	}
	return move{group: i, step: Step{Group: g.Name, Param: param, From: fmt.Sprint(from), To: fmt.Sprint(to), Favour: fav}, edit: edit}
}

// cloneProfile copies p deeply enough that editing one group's fields,
// match lists and evidence leaves p as it was.
func cloneProfile(p *profiles.Profile) *profiles.Profile {
	q := *p
	q.ThreadGroups = slices.Clone(p.ThreadGroups)
	for i := range q.ThreadGroups {
		g := &q.ThreadGroups[i]
		g.Match.CommPrefix = slices.Clone(g.Match.CommPrefix)
		g.Match.ExcludePrefix = slices.Clone(g.Match.ExcludePrefix)
		if g.Evidence != nil {
			e := *g.Evidence
			e.Refined = slices.Clone(e.Refined)
			g.Evidence = &e
		}
	}
	q.Traits.Refined = slices.Clone(p.Traits.Refined)
	return &q
}
