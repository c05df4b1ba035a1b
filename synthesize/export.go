package synthesize

import (
	"errors"
	"fmt"

	"temper.codes/temper-train/profiles"
)

// Export kinds: the profile in another scheduler's or tool's form.
const (
	ExportLayered = "scx-layered" // scx_layered's layer spec (JSON)
	ExportHelm    = "helm"        // values for the agent's Helm chart
)

// ErrExportKind is an export kind that is neither ExportLayered nor
// ExportHelm.
var ErrExportKind = errors.New("unknown export kind")

// Export renders the profile as kind. toml is the profile's TOML
// (r.TOML()), which the Helm values carry under agent.profiles.ID.toml. A
// profile scx_layered cannot run (a lint error for that backend) has no
// layered export.
func (r *Result) Export(kind string, toml []byte) ([]byte, error) {
	switch kind {
	case ExportLayered:
		if fd, bad := profiles.FirstError(profiles.Lint(r.Profile, profiles.LintOptions{Backend: profiles.BackendSCXLayered})); bad {
			return nil, errors.New(fd.String())
		}
		return LayeredSpec(r.Profile)
	case ExportHelm:
		return HelmValues(r.Profile.ID, toml)
	}
	return nil, fmt.Errorf("%w %q (known: %s, %s)", ErrExportKind, kind, ExportLayered, ExportHelm)
}
