package main

import (
	"flag"

	"github.com/aether-mesh/aether/mesh/agent"
)

// quicControlFlags are the TEST ONLY flags of the QUIC security controls
// (agent.Controls): each makes the agent emit a configuration the mesh
// must never run, so that a suite can show what it breaks.
type quicControlFlags struct {
	sharedCert                        *string
	perDownstream, resumption, noSANs *bool
}

func (f *quicControlFlags) register() {
	f.sharedCert = flag.String("test-only-twin-shared-cert", "", "TEST ONLY: every twin presents this SPIFFE ID's SVID, whatever its source account (sources arrive as one)")
	f.perDownstream = flag.Bool("test-only-twin-pool-per-downstream", false, "TEST ONLY: twins set connection_pool_per_downstream_connection, past the twin_pooling_pinned_off gate (#1021)")
	f.resumption = flag.Bool("test-only-quic-resumption", false, "TEST ONLY: QUIC chains state enable_resumption and enable_early_data true, past the quic_r4_pinned gate (R4)")
	f.noSANs = flag.Bool("test-only-svid-omit-dns-sans", false, "TEST ONLY: issue SVIDs without their DNS SANs (Q5: twins' name checks fail)")
}

func (f *quicControlFlags) apply(c *agent.Controls) {
	c.TwinSharedCert = *f.sharedCert
	c.TwinPoolPerDownstream = *f.perDownstream
	c.QUICResumption = *f.resumption
	c.OmitDNSSANs = *f.noSANs
}
