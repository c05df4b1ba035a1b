package scheduler

import (
	"fmt"

	"temper.codes/temper-train/internal/procfs"
)

// CheckPrivileges is the backends' one privilege check: nil when have
// holds every capability of need, else an error wrapping ErrUnsupported
// that names the backend, what needs the capabilities (task) and which are
// lacking. Root holds them all unless a container dropped some.
func CheckPrivileges(have procfs.Caps, backend, task string, need ...int) error {
	lacking := have.Lacking(need...)
	if lacking == "" {
		return nil
	}
	return fmt.Errorf("%s backend: %w: %s needs root (%s): run as root or grant %s",
		backend, ErrUnsupported, task, procfs.Caps(0).Lacking(need...), lacking)
}
