//go:build aethercontrols

// The test-only controls: built only into an aether-agent compiled with
// -tags aethercontrols, as the rigs build it (rigs/node, rigs/images), so
// the agent a node runs cannot emit a broken configuration or publish past
// a config gate. nocontrols.go is the default build's side.

package main

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/identity"
)

// controlsBuilt says this build carries the controls.
const controlsBuilt = true

// controlFlags are the TEST ONLY flags (agent.Controls): each makes the
// agent emit a configuration the mesh must never run, so that a suite can
// show what it breaks. docs/decisions names the entry each reproduces.
type controlFlags struct {
	refuseTwin, sharedCert, extraRoots          *string
	unanswered, sharedEDS                       *bool
	pruneUnfetched, dropOnRemoval               *bool
	perDownstream, resumption, noSANs, wildcard *bool
	gatewayFirst                                *bool
}

func (f *controlFlags) register() {
	f.refuseTwin = flag.String("test-only-refuse-twin", "", "TEST ONLY: refuse this on-demand twin name whatever the registry says (a suite's refused pair)")
	f.unanswered = flag.Bool("test-only-unanswered-refusals", false, "TEST ONLY: leave refused on-demand names unanswered, as Envoy's LinearCache does (the proxy waits out its timeout)")
	f.sharedEDS = flag.Bool("test-only-twin-shares-base-eds", false, "TEST ONLY: give each twin its base h2 cluster's EDS name (#1008: it never warms)")
	f.pruneUnfetched = flag.Bool("test-only-prune-unfetched-since-start", false,
		"TEST ONLY: the pre-#1073 rule: at the end of the fetch window prune every live pair whose twin was not fetched by name since start, held and re-subscribed twins included (live twins are pruned)")
	f.dropOnRemoval = flag.Bool("test-only-drop-pair-on-removal", false,
		"TEST ONLY: no dormant state (pre-#1036): drop a pair whose source account leaves the node or whose destination leaves the dependency set")
	f.sharedCert = flag.String("test-only-twin-shared-cert", "", "TEST ONLY: every twin presents this SPIFFE ID's SVID, whatever its source account (sources arrive as one)")
	f.perDownstream = flag.Bool("test-only-twin-pool-per-downstream", false, "TEST ONLY: twins set connection_pool_per_downstream_connection, past the twin_pooling_pinned_off gate (#1021)")
	f.resumption = flag.Bool("test-only-quic-resumption", false, "TEST ONLY: QUIC chains state enable_resumption and enable_early_data true, past the quic_r4_pinned gate (R4)")
	f.extraRoots = flag.String("test-only-extra-roots", "", "TEST ONLY: also trust the roots in this PEM file for the mesh's trust domain, re-read when it changes (emptying it revokes what they signed)")
	f.wildcard = flag.Bool("test-only-quic-inbound-wildcard", false, "TEST ONLY: QUIC inbounds bind 0.0.0.0 with IP_TRANSPARENT, so a pod's own dial of a peer's 18008 lands in its own inbound")
	f.gatewayFirst = flag.Bool("test-only-gateway-first-service", false, "TEST ONLY: the east-west gateway forwards every exposed service's SNI to the first exposed service's pods, past the gateway_chain_routes_own_service gate")
	f.noSANs = flag.Bool("test-only-svid-omit-dns-sans", false, "TEST ONLY: issue SVIDs without their DNS SANs (Q5: twins' name checks fail)")
}

// upstreamCertModes are the --upstream-cert values this build accepts:
// the mesh's, and the two #831 controls.
const upstreamCertModes = "per-source (the mesh); static (one account's SVID for every source) or unhashed-identity (per connection, but the identity out of the pool key): the two #831 controls"

// roots is the extra-roots control over the agent's identity store, or
// nil when it is off.
func (f *controlFlags) roots(opts *agent.Options, log *slog.Logger) (*extraRoots, error) {
	if *f.extraRoots == "" {
		return nil, nil
	}
	store, ok := func() (*identity.Store, bool) {
		if opts.HTTP == nil {
			return nil, false
		}
		s, ok := opts.HTTP.Identities.(*identity.Store)
		return s, ok
	}()
	if !ok {
		return nil, fmt.Errorf("--test-only-extra-roots needs the mTLS path with the embedded CA (--trust-domain, --ca-dir)")
	}
	return newExtraRoots(*f.extraRoots, store, opts.HTTP.TrustDomain, log)
}

func (f *controlFlags) apply(c *agent.Controls) {
	c.RefuseTwin = *f.refuseTwin
	c.UnansweredRefusals = *f.unanswered
	c.TwinSharesBaseEDS = *f.sharedEDS
	c.PruneUnfetchedSinceStart = *f.pruneUnfetched
	c.DropPairOnRemoval = *f.dropOnRemoval
	c.TwinSharedCert = *f.sharedCert
	c.TwinPoolPerDownstream = *f.perDownstream
	c.QUICResumption = *f.resumption
	c.OmitDNSSANs = *f.noSANs
	c.QUICInboundWildcard = *f.wildcard
	c.GatewayFirstService = *f.gatewayFirst
}
