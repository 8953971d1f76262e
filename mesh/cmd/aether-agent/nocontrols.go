//go:build !aethercontrols

// The default build: no test-only control. Its agent.Controls stay the
// zero value, the agent as shipped, so nothing it publishes has passed a
// config gate it failed. controls.go is the controls' side, built with
// -tags aethercontrols.

package main

import (
	"log/slog"

	"github.com/aether-mesh/aether/mesh/agent"
)

// controlsBuilt says this build carries the controls.
const controlsBuilt = false

// controlFlags has no flag in the default build.
type controlFlags struct{}

func (*controlFlags) register()             {}
func (*controlFlags) apply(*agent.Controls) {}
func (*controlFlags) roots(*agent.Options, *slog.Logger) (*extraRoots, error) {
	return nil, nil
}

// upstreamCertModes are the --upstream-cert values this build accepts.
const upstreamCertModes = "per-source, the only mode of this build (the #831 controls static and unhashed-identity are built with -tags aethercontrols)"
