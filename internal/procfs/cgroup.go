package procfs

import (
	"fmt"
	"strings"
)

// Cgroups is a task's place in the cgroup hierarchies, from its cgroup file
// (cgroups(7)): paths are relative to each hierarchy's root and start with
// "/". An empty path means the task is in no such hierarchy (it is not
// mounted).
type Cgroups struct {
	V2 string // the v2 (unified) hierarchy: the "0::/path" line
	// V1 holds the path in each v1 hierarchy by the names on its line: its
	// controllers ("cpu", "cpuacct", "memory") and a named hierarchy's
	// "name=systemd". Nil on a v2-only host.
	V1 map[string]string
}

// CPU returns the path of the cgroup whose CPU settings apply to the task:
// the one in the v1 hierarchy holding the cpu controller when there is one
// (on a v1 or hybrid host that is where the kubelet's CPU settings live),
// else the v2 one; "" when the task is in neither.
func (c Cgroups) CPU() string {
	if p, ok := c.V1["cpu"]; ok {
		return p
	}
	return c.V2
}

// ParseCgroup parses a cgroup file, whose lines are
// "hierarchy-id:controllers:path": the v2 line is "0::/path", and each v1
// line names the comma-separated controllers of its hierarchy. The path
// may itself hold colons.
func ParseCgroup(data []byte) (Cgroups, error) {
	var c Cgroups
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return Cgroups{}, fmt.Errorf("cgroup line %q: want id:controllers:path", line)
		}
		if id == "0" && ctrls == "" {
			c.V2 = path
			continue
		}
		if c.V1 == nil {
			c.V1 = map[string]string{}
		}
		for ctrl := range strings.SplitSeq(ctrls, ",") {
			c.V1[ctrl] = path
		}
	}
	return c, nil
}
