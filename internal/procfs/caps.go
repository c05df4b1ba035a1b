package procfs

import (
	"fmt"
	"os"
	"strings"
)

// Capability numbers (linux/capability.h) the project checks for.
const (
	CapSysNice  = 23
	CapSysAdmin = 21
	CapPerfmon  = 38
	CapBPF      = 39
)

var capNames = map[int]string{CapSysNice: "CAP_SYS_NICE", CapSysAdmin: "CAP_SYS_ADMIN", CapPerfmon: "CAP_PERFMON", CapBPF: "CAP_BPF"}

// Caps is an effective capability set, a bit per capability.
type Caps uint64

// EffectiveCaps reads this process's effective capability set (CapEff in
// /proc/self/status): the one place the project asks what it may do.
func EffectiveCaps() (Caps, error) {
	st, err := FS{}.Status(os.Getpid())
	if err != nil {
		return 0, fmt.Errorf("read capabilities: %w", err)
	}
	if st.Present&StatusCapEff == 0 {
		return 0, fmt.Errorf("read capabilities: /proc/self/status has no CapEff line")
	}
	return Caps(st.CapEff), nil
}

// Has reports whether every capability c is in the set.
func (s Caps) Has(c ...int) bool {
	for _, x := range c {
		if s&(1<<uint(x)) == 0 {
			return false
		}
	}
	return true
}

// Lacking names the capabilities of c not in the set, joined with " and "
// ("" when none is lacking).
func (s Caps) Lacking(c ...int) string {
	var out []string
	for _, x := range c {
		if !s.Has(x) {
			n, ok := capNames[x]
			if !ok {
				n = fmt.Sprintf("capability %d", x)
			}
			out = append(out, n)
		}
	}
	return strings.Join(out, " and ")
}
