package report

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
)

// quotaFixture is a 1.5-CPU pod at bg 0 and 4 (seed 003's shape) with
// the arms given: the stock CFS arm throttled at its quota, the refined arm
// either on CFS too or, on sched_ext, unthrottled and not kernel-limited.
func quotaFixture(backend string, quota float64, tier bool, ceiling float64) Report {
	r := fixture()
	r.Backend = backend
	r.Quota = nil
	r.Arms = []Arm{{Name: "stock CFS", Desc: "no profile"}}
	if tier {
		r.Arms = append(r.Arms, Arm{Name: "tier only", Desc: "no profile; the node's tier in force"})
	}
	r.Arms = append(r.Arms, Arm{Name: "refined", Desc: "refined profile"})
	for _, bg := range []int{0, 4} {
		for _, a := range r.Arms {
			q := QuotaRow{Bg: bg, Arm: a.Name, N: 12, Quota: quota, Cores: 1.486 - 0.01*float64(bg),
				Values: map[string]float64{"throughput": 67500 - 500*float64(bg), "p99_ms": 56.8 + float64(bg)}}
			if quota > 0 {
				q.Enforced, q.Periods, q.Throttled, q.ThrottledS = EnforcedCFS, 200, 199, 16.48
			}
			if a.Name == "refined" {
				q.Cores, q.Values = 1.353, map[string]float64{"throughput": 59200, "p99_ms": 30.8}
				if backend == "sched_ext" && quota > 0 {
					q.Enforced, q.Throttled, q.ThrottledS = fmt.Sprintf(EnforcedNone, backend), 0, 0
					if ceiling > 0 {
						q.Enforced = fmt.Sprintf(EnforcedCeiling, ceiling, backend)
					}
				}
			}
			if quota == 0 {
				q.Cores += 0.4
			}
			r.Quota = append(r.Quota, q)
		}
	}
	return r
}

func TestQuotaGolden(t *testing.T) {
	var b bytes.Buffer
	for _, c := range []struct {
		name    string
		backend string
		quota   float64
		tier    bool
		ceiling float64
	}{
		{"CFS backend, 1.5-CPU limit, with the tier", "cfs", 1.5, true, 0},
		{"sched_ext backend, 1.5-CPU limit", "sched_ext", 1.5, false, 1.5},
		{"sched_ext backend, 1.5-CPU limit, --no-ceilings", "sched_ext", 1.5, false, 0},
		{"CFS backend, no limit", "cfs", 0, true, 0},
	} {
		r := quotaFixture(c.backend, c.quota, c.tier, c.ceiling)
		fmt.Fprintf(&b, "<!-- %s -->\n\n", c.name)
		r.quota(&b)
		md := markdown(r)
		caveat := strings.Contains(md, "- The arms are not limit-identical: the kernel does not enforce cpu.max while a sched_ext scheduler is attached")
		if want := c.backend == "sched_ext" && c.quota > 0; caveat != want {
			t.Errorf("%s: the caveat that sched_ext arms are not kernel-limited in Caveats: %v, want %v", c.name, caveat, want)
		}
	}
	testkit.Golden(t, filepath.Join("testdata", "quota.md"), b.Bytes())
	for _, must := range []string{
		"| bg spinners | arm | cores consumed | quota (cores) | enforced by | throttled periods | throttled time | throughput | p99_ms | n |",
		"| 0 | stock CFS | 1.486 | 1.5 | kernel (CFS bandwidth) | 199 of 200 | 16.5 s | 67.5k | 56.8 | 12 |",
		"| 4 | refined | 1.353 | 1.5 | the scheduler's ceiling, 1.5 CPUs (sched_ext), not the kernel | 0 of 200 | 0 s |",
		"| 4 | refined | 1.353 | 1.5 | none: not limited (sched_ext ignores cpu.max) | 0 of 200 | 0 s |",
		"An arm whose enforcer is \"none\" ran without that ceiling",
		"| 0 | tier only | 1.886 | none | — | — | — |",
		"**The arms are not limit-identical**",
		"## CPU consumed by the pod",
	} {
		if !strings.Contains(b.String(), must) {
			t.Errorf("the quota tables lack %q", must)
		}
	}
}

func TestNoQuotaTable(t *testing.T) {
	if md := markdown(fixture()); strings.Contains(md, "Quota parity") || strings.Contains(md, "CPU consumed by the pod") {
		t.Error("a report without usage records has a quota table")
	}
}
