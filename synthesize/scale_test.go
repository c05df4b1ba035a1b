package synthesize

import (
	"fmt"
	"temper.codes/temper-train/analyze"
	"testing"

	"temper.codes/temper-train/profiles"
)

// largeAnalysis is a JVM-sized workload: n threads in many families whose
// names are prefixes of each other ("w", "w1", "w1-x" ...), spread over
// every class, several processes, so that resolve has many exclusions,
// splits and merges to work out.
func largeAnalysis(n int) *analyze.Analysis {
	classes := map[int]analyze.Class{1: analyze.ClassSyncCompute, 2: analyze.ClassLatencyCritical, 3: analyze.ClassIOWakeChain, 4: analyze.ClassSporadic}
	var ts []th
	for i := range n {
		tid := int32(1000 + i)
		tgid := int32(1000 + (i%7)*(n/7))
		if i%(n/7) == 0 {
			tgid = tid
		}
		name := fmt.Sprintf("w%d", i%40)
		if i%3 == 0 {
			name += fmt.Sprintf("-x%d", i%11)
		}
		ts = append(ts, th{tid: tid, tgid: tgid, comm: name, cluster: 1 + (i*7)%4, share: float64(i%50) / 100})
	}
	return mkAnalysis(classes, ts...)
}

// TestLargeAnalysis: a 2100-thread analysis settles (in well under a
// second) into a profile that passes every check.
func TestLargeAnalysis(t *testing.T) {
	a := largeAnalysis(2100)
	r, err := Profile(a, Options{ID: "large", Shape: &profiles.Shape{LogicalCPUs: 64, Cores: 32, ThreadsPerCore: 2}, RequestMillicores: 16000})
	if err != nil {
		t.Fatal(err)
	}
	checkProfile(t, a, r)
}
