package synthesize

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"temper.codes/temper-train/profiles"
)

// ReportGroups writes the profile for a terminal: its id, shape and traits, and
// a table of its thread groups with their treatment, sizing and match.
func (r *Result) ReportGroups(w io.Writer) error {
	p := r.Profile
	fmt.Fprintf(w, "profile %s for %s (request %dm, %d threads, %d hot)\n", p.ID, p.MachineShape.Key(),
		p.Traits.CPURequestMillicores, p.Traits.Threads, p.Traits.HotThreads)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTREATMENT\tTHREADS\tHOT\tCORES\tCPU_FRACTION\tSLICE_US\tWEIGHT\tMATCH")
	for _, g := range p.ThreadGroups {
		threads, hot := "-", "-"
		if e := g.Evidence; e != nil {
			threads, hot = strconv.Itoa(e.Threads), strconv.Itoa(e.HotThreads)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, g.Treatment, threads, hot,
			dash(g.ExclusiveCores), dashF(g.CPUFraction), dash(g.SliceUs), dash(g.Weight), matchText(g.Match))
	}
	return tw.Flush()
}

// dash writes n, or "-" for an unset 0.
func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// dashF writes x, or "-" for an unset 0.
func dashF(x float64) string {
	if x == 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// matchText writes a match as kind=values, ANDed with spaces.
func matchText(m profiles.Match) string {
	var parts []string
	list := func(kind string, v []string) {
		if len(v) == 0 {
			return
		}
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = strconv.Quote(s)
		}
		parts = append(parts, kind+"="+strings.Join(q, ","))
	}
	list("comm_prefix", m.CommPrefix)
	if m.CommRegex != "" {
		parts = append(parts, "comm_regex="+strconv.Quote(m.CommRegex))
	}
	list("exclude_prefix", m.ExcludePrefix)
	list("pcomm_prefix", m.PcommPrefix)
	list("cmdline_prefix", m.CmdlinePrefix)
	if m.GroupLeader != nil {
		parts = append(parts, "group_leader="+strconv.FormatBool(*m.GroupLeader))
	}
	if m.CgroupPrefix != "" {
		parts = append(parts, "cgroup_prefix="+strconv.Quote(m.CgroupPrefix))
	}
	if m.All {
		parts = append(parts, "all")
	}
	return strings.Join(parts, " ")
}
