package synthesize

import (
	"math"
	"path"
	"slices"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
)

// evidenceOf is what the analysis measured for a group's threads: the
// classes and confidence of their clusters, thread and hot-thread counts,
// the CPUs they used together, member medians of run length and wake
// latency (analyze's clusters report member medians too), the group's total
// wake rate, its families, the trace, and the sizing arithmetic.
func evidenceOf(g *group, ms []member, trace string) *profiles.Evidence {
	e := &profiles.Evidence{Threads: len(g.members), Trace: trace, Arithmetic: strings.Join(g.arithmetic, "; ")}
	var classes []analyze.Class
	var families []string
	var cpus, wake, conf float64
	var p50, p99, lat []int64
	for _, i := range g.members {
		m := &ms[i]
		f := &m.th.Features
		if m.hot {
			e.HotThreads++
		}
		cpus += f.CPUShare
		wake += f.WakeRate
		conf += m.cluster.Confidence
		classes = append(classes, m.cluster.Class)
		families = append(families, display(m.th.Family))
		if f.Run.N > 0 {
			p50 = append(p50, f.Run.P50)
			p99 = append(p99, f.Run.P99)
		}
		if f.WakeLatency.N > 0 {
			lat = append(lat, f.WakeLatency.P99)
		}
	}
	e.Class = classList(classes)
	if n := len(g.members); n > 0 {
		e.Confidence = round(conf/float64(n), 2)
	}
	e.CPUs = round(cpus, 4)
	e.WakeRateHz = round(wake, 1)
	if len(p50) > 0 {
		e.RuntimeP50Us = round(medianInt(p50)/1000, 1)
		e.RuntimeP99Us = round(medianInt(p99)/1000, 1)
	}
	if len(lat) > 0 {
		e.WakeLatencyP99Us = round(medianInt(lat)/1000, 1)
	}
	slices.Sort(families)
	e.Families = slices.Compact(families)
	return e
}

// classList names the classes of a group's clusters in class order,
// "latency_critical+sporadic" when a group took several, "none" when it has
// no observed threads (a catch-all for threads the trace did not see).
func classList(classes []analyze.Class) string {
	var out []string
	for _, c := range slotClasses {
		if slices.Contains(classes, c) {
			out = append(out, string(c))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "+")
}

// traitsOf are the workload-level measurements: the request and limit it
// was sized for, threads, hot threads, the CPUs the analysed threads used
// together, and the share of CFS periods throttled while observed (from the
// analysis' CFS lint, when the snapshot had the counters).
func traitsOf(a *analyze.Analysis, ms []member, req requestChoice) profiles.Traits {
	t := profiles.Traits{CPURequestMillicores: req.milli, CPULimitMillicores: req.limit, Threads: len(ms)}
	cpus := 0.0
	for i := range ms {
		cpus += ms[i].th.Features.CPUShare
		if ms[i].hot {
			t.HotThreads++
		}
	}
	t.ObservedCPUsUsed = round(cpus, 3)
	if c := a.Lint.CFS; c.Periods != nil && *c.Periods > 0 {
		t.ThrottledFraction = round(c.ThrottledShare, 3)
	}
	return t
}

// fingerprintOf says which pods and processes the profile is for: the
// annotation value is the id; images come from the pod the snapshot
// recorded, generalised to any tag ("mariadb:11.4" → "mariadb:*"); process
// names are the analysed threads' process comms.
func fingerprintOf(id string, ms []member, snap *snapshot.Snapshot) profiles.Fingerprint {
	f := profiles.Fingerprint{Annotation: id}
	if snap != nil && snap.Pod != nil {
		for _, img := range snap.Pod.Images() {
			f.Images = append(f.Images, imageGlobs(img)...)
		}
		slices.Sort(f.Images)
		f.Images = slices.Compact(f.Images)
	}
	for i := range ms {
		// Only a complete, printable process comm: a cut one would never
		// equal the process's name.
		if pc := ms[i].pcomm; pc != "" && pc == ms[i].seen.Pcomm {
			f.ProcessNames = append(f.ProcessNames, pc)
		}
	}
	slices.Sort(f.ProcessNames)
	f.ProcessNames = slices.Compact(f.ProcessNames)
	return f
}

// imageGlobs generalises an image reference to any tag of its repository,
// and any digest when it was pinned by one. The registry stays: an image
// from another registry is another build.
func imageGlobs(img string) []string {
	img = printablePrefix(img, len(img))
	repo, digest, hasDigest := strings.Cut(img, "@")
	slash := strings.LastIndex(repo, "/")
	if colon := strings.LastIndex(repo, ":"); colon > slash {
		repo = repo[:colon]
	}
	if repo == "" || strings.ContainsAny(repo, `*?[\`) {
		return nil
	}
	out := []string{repo + ":*"}
	if hasDigest && digest != "" {
		out = append(out, repo+"@*")
	}
	for _, g := range out {
		if _, err := path.Match(g, ""); err != nil {
			return nil
		}
	}
	return out
}

// round rounds x to prec decimals, so that the profile shows measured
// precision and not float noise.
func round(x float64, prec int) float64 {
	p := math.Pow(10, float64(prec))
	return math.Round(x*p) / p
}
