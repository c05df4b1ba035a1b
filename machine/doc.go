// Package machine is the one model of the machine the pipeline measures on
// and applies to: its CPU topology as sysfs describes it, CPU lists as the
// kernel writes them, machine shapes (the keys profiles are chosen by) and
// scheduling policy names. observe's snapshot records it, synthesize keys
// profiles by it, profiles' lint checks against it, and the scheduler
// allocates cores on it.
package machine
