package scx

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

func TestFindTier(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "kubepods", "besteffort")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	tests := []struct {
		name string
		dir  string
		want tierCgroup
		err  bool
	}{
		{"two below the root", dir, tierCgroup{ID: ino, Level: 2}, false},
		{"trailing slash", dir + "/", tierCgroup{ID: ino, Level: 2}, false},
		{"the root itself", root, tierCgroup{}, true},
		{"outside the hierarchy", filepath.Dir(root), tierCgroup{}, true},
		{"missing", filepath.Join(root, "nope"), tierCgroup{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findTier(root, tt.dir)
			if tt.err {
				if !errors.Is(err, ErrTierCgroup) {
					t.Fatalf("findTier: %v, want ErrTierCgroup", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("findTier = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestConfigTier: the tier's layer comes before the default one, which
// stays last, and is served after every other DSQ.
func TestConfigTier(t *testing.T) {
	for _, tt := range []struct {
		name   string
		groups []profiles.ThreadGroup
	}{
		{"no groups (tier only)", nil},
		{"a profile", []profiles.ThreadGroup{
			{Name: "y", Match: profiles.Match{CommPrefix: []string{"y"}}, Treatment: profiles.Yield},
			{Name: "l", Match: profiles.Match{All: true}, Treatment: profiles.Latency},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &profiles.Profile{SchemaVersion: 1, ID: "x", ThreadGroups: tt.groups}
			cfg, err := buildConfig(planFor(t, p, smtTopology(1)))
			if err != nil {
				t.Fatal(err)
			}
			before := slices.Clone(cfg.Order)
			def := cfg.DefaultLayer()
			cfg.addTier()
			n := len(tt.groups)
			if def != n || cfg.DefaultLayer() != n+1 || cfg.Tier != n || len(cfg.Layers) != n+2 {
				t.Errorf("default layer %d → %d, tier %d, %d layers; want %d → %d, %d, %d", def, cfg.DefaultLayer(), cfg.Tier, len(cfg.Layers), n, n+1, n, n+2)
			}
			if cfg.Names[cfg.Tier] != BestEffortLayer || cfg.Names[cfg.DefaultLayer()] != scheduler.Unmatched {
				t.Errorf("names %v", cfg.Names)
			}
			if l := cfg.Layers[cfg.Tier]; l.Treatment != tsBestEffort || l.SliceNs != 5e6 {
				t.Errorf("tier layer %+v", l)
			}
			if want := append(before, layerDSQBase+uint64(cfg.Tier)); !slices.Equal(cfg.Order, want) {
				t.Errorf("order %#x, want %#x", cfg.Order, want)
			}
			if got := cfg.orderString(); got[len(got)-len("besteffort"):] != "besteffort" {
				t.Errorf("order %q does not end with besteffort", got)
			}
		})
	}
}
