package stats

import (
	"errors"
	"fmt"
)

// Direction says which way a metric improves. The ledger records it as
// -1 or +1. Its zero value is no direction at all: a metric tuned in a
// guessed direction could be made worse with confidence, so every rule
// that takes a Direction refuses the zero value instead of defaulting it.
type Direction int8

// The two directions.
const (
	LowerIsBetter  Direction = -1
	HigherIsBetter Direction = +1
)

// ErrNoDirection is wrapped by Direction.Check for a value that is neither
// LowerIsBetter nor HigherIsBetter (the zero value included).
var ErrNoDirection = errors.New("no direction: want -1 (lower is better) or +1 (higher is better)")

func (d Direction) String() string {
	switch d {
	case LowerIsBetter:
		return "lower is better"
	case HigherIsBetter:
		return "higher is better"
	}
	return fmt.Sprintf("Direction(%d)", int8(d))
}

// Check returns an error wrapping ErrNoDirection unless d is one of the two
// directions.
func (d Direction) Check() error {
	if d == LowerIsBetter || d == HigherIsBetter {
		return nil
	}
	return fmt.Errorf("direction %d: %w", int8(d), ErrNoDirection)
}

// Better names the values that are better: "lower" or "higher".
func (d Direction) Better() string {
	d.must()
	if d == HigherIsBetter {
		return "higher"
	}
	return "lower"
}

// sign is d as a factor: a relative shift times sign is a gain.
func (d Direction) sign() float64 {
	d.must()
	return float64(d)
}

// must panics on a direction that is neither: the decision functions have
// no error to return, and a metric decided in a guessed direction is a
// programming error upstream of them (Direction.Check refuses it first).
func (d Direction) must() {
	if err := d.Check(); err != nil {
		panic("stats: " + err.Error())
	}
}
