package machine

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Identity names the machine a measurement was made on: a refine ledger
// records it, and a ledger from another machine is not resumed here.
type Identity struct {
	Hostname string `json:"hostname"`
	Shape    string `json:"shape"` // Shape.Key()
	CPUModel string `json:"cpu_model,omitempty"`
	Kernel   string `json:"kernel"`
}

// Identify is this machine's identity, with shape as its shape: the host
// name, the kernel release and the CPU model /proc/cpuinfo names. A part
// that cannot be read is left empty.
func Identify(shape Shape) Identity {
	id := Identity{Shape: shape.Key()}
	id.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		id.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				id.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return id
}
