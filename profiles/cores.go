package profiles

// CoreBudget is the one rule for handing out exclusive cores: exclusive
// groups take whole cores in group order, and one core always stays shared
// for everything else. A group whose cores do not fit takes nothing, so a
// later, smaller group may still fit. Lint, scheduler.Allocate and
// synthesize's sizer all follow it; what a group that does not fit gets
// is theirs to say (lint reports it, the scheduler refuses the plan,
// synthesize and Demote give it latency treatment).
type CoreBudget struct {
	cores, taken int
}

// NewCoreBudget is the budget of a machine with the given number of
// physical cores.
func NewCoreBudget(cores int) *CoreBudget { return &CoreBudget{cores: cores} }

// Left is how many cores can still be given: every core but the shared one,
// less those taken.
func (b *CoreBudget) Left() int { return max(b.cores-1-b.taken, 0) }

// Taken is how many cores have been given.
func (b *CoreBudget) Taken() int { return b.taken }

// Take gives n cores when they fit and reports whether they did.
func (b *CoreBudget) Take(n int) bool {
	if n <= 0 || n > b.Left() {
		return false
	}
	b.taken += n
	return true
}

// ExclusiveFits runs the budget over p's exclusive groups on a machine with
// the given number of cores: fits[i] says whether group i gets its
// ExclusiveCores, left[i] how many cores were free when its turn came.
// Non-exclusive groups, and exclusive ones without a core count, are false.
func ExclusiveFits(p *Profile, cores int) (fits []bool, left []int) {
	b := NewCoreBudget(cores)
	fits, left = make([]bool, len(p.ThreadGroups)), make([]int, len(p.ThreadGroups))
	for i, g := range p.ThreadGroups {
		left[i] = b.Left()
		if g.Treatment == Exclusive {
			fits[i] = b.Take(g.ExclusiveCores)
		}
	}
	return fits, left
}
