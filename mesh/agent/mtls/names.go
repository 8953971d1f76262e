// Package mtls builds the agent's resources for the mTLS HTTP/2 path: the
// SDS secrets (one SVID per local service account, the trust bundle), the
// per-pod inbound listener on 18008 and outbound HTTP listener on 18081,
// and the h2 clusters between them. The shapes are the contract's
// (ARCHITECTURE.md, "The mTLS HTTP/2 path"); the proxy consumes exactly
// these. Names come from mesh/xdsnames.
package mtls

import "github.com/aether-mesh/aether/mesh/xdsnames"

// The set_filter_state factories an outbound listener may stamp its
// identity with: HashableString in the mesh, PlainString only for a
// control (#831).
const (
	HashableString = xdsnames.HashableStringFactory
	PlainString    = xdsnames.StringFactory
)
