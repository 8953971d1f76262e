// Package federation joins trust domains by exchanging SPIFFE bundles
// (the SPIFFE Federation specification, through go-spiffe's federation
// package): each cluster keeps its own CA and trust domain, serves its
// bundle on a bundle endpoint, and fetches each peer's from the peer's
// endpoint.
//
// Both sides use the https_spiffe profile: the endpoint presents an SVID of
// its own trust domain with the ID EndpointID, and a fetcher authenticates
// it with that trust domain's bundle, the one it fetched last or, before the
// first fetch, one handed over out of band (Peer.Bootstrap). https_web
// would need a Web PKI certificate for each endpoint's address; the mesh
// has a CA per cluster already, and its endpoints sit on addresses no
// public CA names.
//
// A Server serves a Source's local bundle; a Fetcher keeps the last good
// bundle of each peer and serves the set as an x509bundle.Source, with a
// change notification, for the agent to merge into the trust bundle it
// publishes.
package federation

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// EndpointPath is the path of EndpointID: outside /ns/, where workloads'
// IDs live, so no service account is ever issued a bundle endpoint's ID.
const EndpointPath = "/aether/bundle-endpoint"

// EndpointID is the SPIFFE ID a bundle endpoint of td presents, and the
// one a fetcher of td's bundle requires (https_spiffe's endpoint SPIFFE
// ID).
func EndpointID(td spiffeid.TrustDomain) spiffeid.ID {
	id, err := spiffeid.FromPath(td, EndpointPath)
	if err != nil {
		// EndpointPath is a constant that spiffeid accepts.
		panic(fmt.Sprintf("bundle endpoint ID of %q: %v", td, err))
	}
	return id
}

// ParseTrustDomain takes a trust domain name, as identity's CA does: a
// spiffe:// ID, which go-spiffe would also take, is refused, since a
// configuration that says "spiffe://x/y" meant something else.
func ParseTrustDomain(name string) (spiffeid.TrustDomain, error) {
	if name == "" {
		return spiffeid.TrustDomain{}, errors.New("invalid trust domain: empty")
	}
	if strings.Contains(name, ":") {
		return spiffeid.TrustDomain{}, fmt.Errorf("invalid trust domain %q: want a name such as \"aether.test\", not a URI", name)
	}
	td, err := spiffeid.TrustDomainFromString(name)
	if err != nil {
		return spiffeid.TrustDomain{}, fmt.Errorf("invalid trust domain %q: %w", name, err)
	}
	return td, nil
}

// ParseEndpointURL checks raw is a bundle endpoint URL: https, with a host
// and no user info, query or fragment (the profile is https_spiffe; a
// credential in the URL would be sent to whoever answers).
func ParseEndpointURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bundle endpoint URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return nil, fmt.Errorf("bundle endpoint URL %q: scheme %q, want https", raw, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("bundle endpoint URL %q: no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("bundle endpoint URL %q: user info is not allowed", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("bundle endpoint URL %q: a query or fragment is not allowed", raw)
	}
	return u, nil
}
