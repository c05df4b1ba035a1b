package profiles

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// The pod annotations that name a profile explicitly. The legacy key is
// from the product's former name and is still honoured.
const (
	AnnotationProfile       = "temper.codes/workload-profile"
	LegacyAnnotationProfile = "infera.io/workload-profile"
)

// PodInfo is what resolution looks at: a pod's annotations and container
// images, or for a target outside Kubernetes its process names (comms).
type PodInfo struct {
	Annotations  map[string]string
	Images       []string
	ProcessNames []string
}

// Choice is the outcome of Resolve: the profile chosen (nil when none
// applies) and why, one step per line.
type Choice struct {
	Profile     *Profile
	Source      string
	Builtin     bool
	Explanation []string
}

// Resolve picks the profile for a pod on a machine of the given shape:
//
//  1. The annotation temper.codes/workload-profile (or the legacy
//     infera.io/workload-profile) names an id, matched against profile ids
//     and then fingerprint.annotation. It beats every other signal. An
//     annotation that names no profile, or a profile with no version for
//     this machine, is an error: an explicit request is never silently
//     dropped.
//  2. Otherwise the first container image that matches a fingerprint.images
//     glob selects its id (images are also tried without docker.io/ and
//     library/), then process names against fingerprint.process_names.
//  3. Among the profiles with that id, only those whose machine_shape
//     matches the machine are candidates (zero fields match anything).
//  4. A file profile replaces a builtin with the same id and shape key.
//  5. The most specific shape (most fields set) wins; ties go to files over
//     builtins, then to the smaller shape key and source, and are reported.
//
// With no annotation and nothing matching, Choice.Profile is nil and the
// explanation says so; that is not an error.
func Resolve(cands []Candidate, pod PodInfo, machine Shape) (Choice, error) {
	var ch Choice
	say := func(format string, args ...any) {
		ch.Explanation = append(ch.Explanation, fmt.Sprintf(format, args...))
	}

	id, explicit, err := selectID(cands, pod, say)
	if err != nil {
		return ch, err
	}
	if id == "" {
		return ch, nil
	}

	var fit []Candidate
	for _, c := range cands {
		if c.Profile.ID != id {
			continue
		}
		if c.Profile.MachineShape.Matches(machine) {
			fit = append(fit, c)
			say("%s (shape %s) fits the machine (%s)", describe(c), c.Profile.MachineShape.Key(), machine.Key())
		} else {
			say("%s (shape %s) does not fit the machine (%s)", describe(c), c.Profile.MachineShape.Key(), machine.Key())
		}
	}
	if len(fit) == 0 {
		if explicit {
			return ch, fmt.Errorf("profile %q has no version for a %s machine (%s); add %s/%s.toml or remove the annotation: %w",
				id, machine.Key(), shapesOf(cands, id), id, machine.Key(), ErrUnknownProfile)
		}
		say("no profile %s fits a %s machine: the pod gets none", id, machine.Key())
		return ch, nil
	}

	fit = overrideBuiltins(fit, say)
	sort.SliceStable(fit, func(i, j int) bool { return better(fit[i], fit[j]) })
	best := fit[0]
	for _, c := range fit[1:] {
		if c.Profile.MachineShape.Specificity() == best.Profile.MachineShape.Specificity() {
			say("tie with %s (%d shape fields each) broken in favour of %s (files before builtins, then by shape key and source)",
				describe(c), c.Profile.MachineShape.Specificity(), describe(best))
		} else {
			say("%s is less specific (%d shape fields against %d)", describe(c), c.Profile.MachineShape.Specificity(), best.Profile.MachineShape.Specificity())
		}
	}
	say("chose %s (shape %s)", describe(best), best.Profile.MachineShape.Key())
	ch.Profile, ch.Source, ch.Builtin = best.Profile, best.Source, best.Builtin
	return ch, nil
}

// selectID finds the profile id a pod asks for or looks like; explicit is
// true when an annotation named it.
func selectID(cands []Candidate, pod PodInfo, say func(string, ...any)) (id string, explicit bool, err error) {
	key, val, ok := annotation(pod.Annotations, say)
	if ok {
		ids := idsWhere(cands, func(p *Profile) bool { return p.ID == val })
		how := "id"
		if len(ids) == 0 {
			ids = idsWhere(cands, func(p *Profile) bool { return p.Fingerprint.Annotation == val })
			how = "fingerprint.annotation of id"
		}
		switch len(ids) {
		case 0:
			return "", true, fmt.Errorf("annotation %s=%s names no profile (known ids: %s): %w", key, val, strings.Join(allIDs(cands), ", "), ErrUnknownProfile)
		case 1:
			say("annotation %s=%s selects %s %s", key, val, how, ids[0])
			return ids[0], true, nil
		default:
			return "", true, fmt.Errorf("annotation %s=%s is the fingerprint.annotation of several profiles (%s); name one id: %w", key, val, strings.Join(ids, ", "), ErrUnknownProfile)
		}
	}
	for _, img := range pod.Images {
		if id, why := matchImage(cands, img); id != "" {
			say("no annotation; image %s %s: selects id %s", img, why, id)
			return id, false, nil
		}
	}
	for _, name := range pod.ProcessNames {
		ids := idsWhere(cands, func(p *Profile) bool { return slices.Contains(p.Fingerprint.ProcessNames, name) })
		if len(ids) > 0 {
			if len(ids) > 1 {
				say("process name %s is claimed by %s; taking the first by id", name, strings.Join(ids, ", "))
			}
			say("no annotation or image match; process name %s selects id %s", name, ids[0])
			return ids[0], false, nil
		}
	}
	say("no annotation, and no profile's fingerprint matches images [%s] or process names [%s]: no profile applies",
		strings.Join(pod.Images, ", "), strings.Join(pod.ProcessNames, ", "))
	return "", false, nil
}

// annotation returns the profile annotation, preferring the current key.
func annotation(a map[string]string, say func(string, ...any)) (key, val string, ok bool) {
	cur, okCur := a[AnnotationProfile]
	old, okOld := a[LegacyAnnotationProfile]
	switch {
	case okCur && okOld && cur != old:
		say("annotations %s=%s and %s=%s disagree: the current key wins", AnnotationProfile, cur, LegacyAnnotationProfile, old)
		return AnnotationProfile, cur, true
	case okCur:
		return AnnotationProfile, cur, true
	case okOld:
		return LegacyAnnotationProfile, old, true
	}
	return "", "", false
}

// matchImage finds the id whose image globs match img. Several matching ids
// are broken by the longest (most literal) glob, then by id.
func matchImage(cands []Candidate, img string) (id, why string) {
	type hit struct{ id, glob, form string }
	var hits []hit
	for _, c := range cands {
		for _, g := range c.Profile.Fingerprint.Images {
			for _, form := range imageForms(img) {
				if ok, _ := path.Match(g, form); ok {
					hits = append(hits, hit{c.Profile.ID, g, form})
					break
				}
			}
		}
	}
	if len(hits) == 0 {
		return "", ""
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if len(hits[i].glob) != len(hits[j].glob) {
			return len(hits[i].glob) > len(hits[j].glob)
		}
		return hits[i].id < hits[j].id
	})
	h := hits[0]
	why = fmt.Sprintf("matches %q", h.glob)
	if h.form != img {
		why = fmt.Sprintf("(as %s) matches %q", h.form, h.glob)
	}
	var others []string
	for _, o := range hits[1:] {
		if o.id != h.id && !slices.Contains(others, o.id) {
			others = append(others, o.id)
		}
	}
	if len(others) > 0 {
		why += fmt.Sprintf(", the longest of the globs that match (also matched: %s)", strings.Join(others, ", "))
	}
	return h.id, why
}

// imageForms lists the spellings of an image reference to try: as given,
// without Docker Hub's registry and library/ prefix, and with :latest when
// it has neither tag nor digest.
func imageForms(img string) []string {
	forms := []string{img}
	short := img
	for _, p := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		short = strings.TrimPrefix(short, p)
	}
	short = strings.TrimPrefix(short, "library/")
	if short != img {
		forms = append(forms, short)
	}
	last := short[strings.LastIndex(short, "/")+1:]
	if !strings.ContainsAny(last, ":@") {
		forms = append(forms, short+":latest")
	}
	return forms
}

// overrideBuiltins drops each builtin that a file with the same id and
// shape key replaces.
func overrideBuiltins(cs []Candidate, say func(string, ...any)) []Candidate {
	var out []Candidate
	for _, c := range cs {
		if c.Builtin {
			replaced := false
			for _, f := range cs {
				if !f.Builtin && f.Profile.MachineShape.Key() == c.Profile.MachineShape.Key() {
					say("file %s overrides %s", f.Source, describe(c))
					replaced = true
					break
				}
			}
			if replaced {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// better orders candidates: most specific shape, then files before
// builtins, then shape key, then source.
func better(a, b Candidate) bool {
	sa, sb := a.Profile.MachineShape.Specificity(), b.Profile.MachineShape.Specificity()
	if sa != sb {
		return sa > sb
	}
	if a.Builtin != b.Builtin {
		return !a.Builtin
	}
	if ka, kb := a.Profile.MachineShape.Key(), b.Profile.MachineShape.Key(); ka != kb {
		return ka < kb
	}
	return a.Source < b.Source
}

func describe(c Candidate) string {
	if c.Builtin {
		return "builtin " + c.Profile.ID
	}
	return "file " + c.Source
}

func idsWhere(cands []Candidate, ok func(*Profile) bool) []string {
	var ids []string
	for _, c := range cands {
		if ok(c.Profile) && !slices.Contains(ids, c.Profile.ID) {
			ids = append(ids, c.Profile.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func allIDs(cands []Candidate) []string {
	return idsWhere(cands, func(*Profile) bool { return true })
}

func shapesOf(cands []Candidate, id string) string {
	var keys []string
	for _, c := range cands {
		if c.Profile.ID == id && !slices.Contains(keys, c.Profile.MachineShape.Key()) {
			keys = append(keys, c.Profile.MachineShape.Key())
		}
	}
	sort.Strings(keys)
	return "it has: " + strings.Join(keys, ", ")
}
