package run

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A setting the run could not grade is refused before anything starts,
// naming it: before, -slo abc or -rate 0 ran the whole soak and then
// failed to write its manifest.
func TestConfigCheckNamesTheBadSetting(t *testing.T) {
	scenario := filepath.Join("..", "..", "fixtures", "scenarios", "soak.yaml")
	good := Config{Scenario: scenario, Roles: SoakRoles, Tick: time.Second, Rate: 150, ProbeInterval: time.Second, SVIDTTL: time.Minute,
		PairFetchWindow: time.Second, MaxRatio: 1.5, SLO: "99.9"}
	if err := good.Check(); err != nil {
		t.Fatalf("a good configuration refused: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Scenario = "fixtures/scenarios/soak.yml" }, "scenario: stat fixtures/scenarios/soak.yml: no such file"},
		{func(c *Config) { c.Rate = 0 }, "rate 0 rps: must be positive"},
		{func(c *Config) { c.SLO = "abc" }, `liveness SLO: "abc" is not a decimal percentage`},
		{func(c *Config) { c.SLO = "101" }, "liveness SLO: 101% is not in (0, 100]"},
		{func(c *Config) { c.MaxRatio = -1 }, "max ratio -1: must be positive"},
		{func(c *Config) { c.ProbeInterval = 0 }, "probe interval 0s: must be positive"},
		{func(c *Config) { c.PairFetchWindow = -time.Second }, "pair fetch window -1s: must be positive"},
		{func(c *Config) { c.Roles = LongRoles }, `roles: load source batch-0 calls "billing", not a service of namespace demo`},
		{func(c *Config) { c.ProbeRate = 5000 }, "faster than the 1ms a pod can keep"},
		{func(c *Config) { l := DefaultLeaks(); l.Every = 1500 * time.Millisecond; c.Leaks = &l }, "must be a whole number of ticks"},
		{func(c *Config) { l := DefaultLeaks(); l.Pairs = 0; c.Leaks = &l }, "every bound must be positive"},
	} {
		c := good
		tc.edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// A run refuses a folder that exists rather than mix its files with
// another run's, before any cluster comes up.
func TestRunRefusesAnotherRunsFolder(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "night-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scenario: filepath.Join("..", "..", "fixtures", "scenarios", "soak.yaml"), Roles: SoakRoles, Out: out, ID: "night-1",
		Duration: 2 * time.Minute, Tick: time.Second, Warmup: 3 * time.Second, Rate: 150, ProbeInterval: time.Second,
		SVIDTTL: time.Minute, PairFetchWindow: time.Second, MaxRatio: 1.5, SLO: "99.9"}
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "another run's") || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Run into an existing folder: %v", err)
	}
}
