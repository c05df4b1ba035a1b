package refine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"temper.codes/temper-train/refine/stats"
)

// A direction is never defaulted: a Config or Guard without one is refused
// by Check, naming the metric.
func TestCheckRefusesNoDirection(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"metric": {func(c *Config) { c.Dir = 0 }, "metric p99_ms"},
		"guard":  {func(c *Config) { c.Guards[0].Dir = 0 }, "guard throughput"},
		"bad":    {func(c *Config) { c.Dir = 3 }, "metric p99_ms"},
	} {
		c := testConfig(1)
		tc.edit(&c)
		c.Defaults()
		err := c.Check()
		if !errors.Is(err, stats.ErrNoDirection) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v; want ErrNoDirection naming %q", name, err, tc.want)
		}
	}
	c := testConfig(1)
	c.Defaults()
	if err := c.Check(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// The ledger's header keeps directions as -1 and +1, so ledgers written
// before Direction was a type read the same and are written back the same.
func TestConfigDirectionJSON(t *testing.T) {
	const old = `{"metric":"p99_ms","dir":-1,"guards":[{"metric":"throughput","dir":1,"bound":0.05}]}`
	var c Config
	if err := json.Unmarshal([]byte(old), &c); err != nil {
		t.Fatal(err)
	}
	if c.Dir != stats.LowerIsBetter || c.Guards[0].Dir != stats.HigherIsBetter {
		t.Errorf("read %v and %v", c.Dir, c.Guards[0].Dir)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"dir":-1,`) || !strings.Contains(s, `"dir":1,`) {
		t.Errorf("written back as %s", s)
	}
}
