package identity

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// EndpointSVID is the SVID of a service of the mesh itself rather than of
// a workload, such as a bundle endpoint: an ID of the CA's trust domain
// outside /ns/, so no service account can be issued it. It is issued on
// first use and re-issued by the first read past half its TTL, so a TLS
// server that reads it per handshake (go-spiffe's tlsconfig) needs no
// rotation loop of its own.
type EndpointSVID struct {
	ca  *CA
	id  spiffeid.ID
	ttl time.Duration

	mu   sync.Mutex
	svid *x509svid.SVID
	due  time.Time
}

var _ x509svid.Source = (*EndpointSVID)(nil)

// NewEndpointSVID issues id's first SVID from ca. id must be of ca's trust
// domain and not a workload's (spiffe://<td>/ns/...): an endpoint holding a
// workload's ID could be impersonated by that workload, and the reverse.
func NewEndpointSVID(ca *CA, id spiffeid.ID, ttl time.Duration) (*EndpointSVID, error) {
	if !id.MemberOf(ca.td) {
		return nil, fmt.Errorf("endpoint SVID %s: not of the CA's trust domain %q", id, ca.td)
	}
	if id.Path() == "" || id.Path() == "/ns" || strings.HasPrefix(id.Path(), "/ns/") {
		return nil, fmt.Errorf("endpoint SVID %s: want a path outside /ns/, which is the workloads'", id)
	}
	if ttl < MinRotatorTTL {
		return nil, fmt.Errorf("endpoint SVID %s: TTL %s is below the minimum %s", id, ttl, MinRotatorTTL)
	}
	e := &EndpointSVID{ca: ca, id: id, ttl: ttl}
	if _, err := e.GetX509SVID(); err != nil {
		return nil, err
	}
	return e, nil
}

// GetX509SVID implements x509svid.Source: the current SVID, re-issued
// first when half its TTL has passed.
func (e *EndpointSVID) GetX509SVID() (*x509svid.SVID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.svid != nil && time.Now().Before(e.due) {
		return e.svid, nil
	}
	now := time.Now().Truncate(time.Second)
	notAfter := now.Add(e.ttl)
	if notAfter.After(e.ca.root.NotAfter) {
		return nil, fmt.Errorf("endpoint SVID %s: expiry %s is after the %s root's %s",
			e.id, notAfter.UTC().Format(time.RFC3339), e.ca.td, e.ca.root.NotAfter.UTC().Format(time.RFC3339))
	}
	// No DNS SANs: the endpoint is authenticated by its SPIFFE ID
	// (https_spiffe), never by a host name.
	svid, err := e.ca.sign(e.id, nil, now.Add(-clockSkew), notAfter)
	if err != nil {
		return nil, fmt.Errorf("endpoint SVID %s: %w", e.id, err)
	}
	e.svid, e.due = svid, notAfter.Add(-e.ttl/2)
	return svid, nil
}
