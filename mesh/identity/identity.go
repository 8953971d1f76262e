// Package identity holds the mesh's workload identities: SPIFFE IDs of the
// form spiffe://<trust-domain>/ns/<ns>/sa/<sa>, the X.509 SVIDs that carry
// them, and the trust bundles that verify them.
//
// The rest of the mesh sees only Source: go-spiffe's bundle source plus a
// per-identity SVID lookup and a change notification. A Store serves it from
// whatever fills it: the embedded CA through a Rotator here, or a SPIRE
// Workload API watcher, whose X509Context (SVIDs plus a bundle set) maps onto
// Store.PutSVID and Store.PutBundle one for one. Nothing outside this package
// may assume the embedded CA.
package identity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Source is what the mesh reads identities from.
type Source interface {
	SVIDSource

	// GetX509BundleForTrustDomain is go-spiffe's x509bundle.Source, so a
	// Source plugs straight into go-spiffe's verifiers and TLS configs.
	x509bundle.Source

	// Subscribe exists because the agent pushes SDS secrets rather than
	// polling: the returned channel receives a value after any SVID or
	// bundle changed. It is coalescing (capacity one, never blocks the
	// writer), so a slow reader misses no final state, only intermediate
	// ones; on receipt it re-reads what it serves. cancel stops delivery.
	Subscribe() (changed <-chan struct{}, cancel func())
}

// SVIDSource looks an SVID up by identity. go-spiffe's x509svid.Source
// serves a single workload; a node agent serves one tls_certificate per
// local service account, so it needs the SVID of a named identity. A
// Workload API that returns several SVIDs (X509Context.SVIDs) serves this
// by ID, as Store does.
type SVIDSource interface {
	// GetX509SVIDFor returns the current SVID for id, or an error wrapping
	// ErrNoSVID when there is none.
	GetX509SVIDFor(id spiffeid.ID) (*x509svid.SVID, error)
}

var (
	// ErrNoSVID says a source holds no SVID for the identity asked for.
	ErrNoSVID = errors.New("no SVID")
	// ErrNoBundle says a source holds no bundle for the trust domain asked
	// for: a peer of that trust domain cannot be verified.
	ErrNoBundle = errors.New("no trust bundle")
)

// Workload returns the go-spiffe x509svid.Source for one identity of src. It
// reads src on every call, so a TLS config built on it (go-spiffe's
// tlsconfig, which calls GetX509SVID per handshake) presents the rotated SVID
// from the next handshake on.
func Workload(src SVIDSource, id spiffeid.ID) x509svid.Source {
	return workload{src: src, id: id}
}

type workload struct {
	src SVIDSource
	id  spiffeid.ID
}

func (w workload) GetX509SVID() (*x509svid.SVID, error) {
	return w.src.GetX509SVIDFor(w.id)
}

// Account is a Kubernetes service account: the unit of identity in the mesh.
type Account struct {
	Namespace      string
	ServiceAccount string
}

func (a Account) String() string { return a.Namespace + "/" + a.ServiceAccount }

// validate requires both names to be DNS-1123 labels. Kubernetes allows dots
// in service account names, but the DNS SANs <sa>.<ns>.<mesh-domain> and the
// QUIC SNI are read by label position, so a dot would make them ambiguous.
func (a Account) validate() error {
	for _, f := range []struct{ field, value string }{
		{"namespace", a.Namespace},
		{"service account", a.ServiceAccount},
	} {
		if f.value == "" {
			return fmt.Errorf("account %q: empty %s", a, f.field)
		}
		if errs := validation.IsDNS1123Label(f.value); len(errs) > 0 {
			return fmt.Errorf("account %q: %s %q is not a DNS-1123 label: %s",
				a, f.field, f.value, strings.Join(errs, "; "))
		}
	}
	return nil
}

// ID returns the SPIFFE ID spiffe://<td>/ns/<ns>/sa/<sa> of an account.
func ID(td spiffeid.TrustDomain, a Account) (spiffeid.ID, error) {
	if td.IsZero() {
		return spiffeid.ID{}, fmt.Errorf("identity of %q: empty trust domain", a)
	}
	if err := a.validate(); err != nil {
		return spiffeid.ID{}, err
	}
	id, err := spiffeid.FromSegments(td, "ns", a.Namespace, "sa", a.ServiceAccount)
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("identity of %q in trust domain %q: %w", a, td, err)
	}
	return id, nil
}
