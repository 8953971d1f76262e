package main

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/identity/federation"
)

// federationFlags federate the mesh's trust domain with others
// (ARCHITECTURE.md, "Federation"): serve this cluster's bundle, fetch the
// peers'.
type federationFlags struct {
	endpoint          *string
	hint              *time.Duration
	federate, bundles listFlag
}

func (f *federationFlags) register() {
	f.endpoint = flag.String("bundle-endpoint", "", "serve the trust domain's SPIFFE bundle on this host:port (https_spiffe: the endpoint presents spiffe://<trust-domain>"+federation.EndpointPath+"); needs the mTLS path")
	f.hint = flag.Duration("bundle-refresh-hint", federation.DefaultRefreshHint, "refresh hint the bundle endpoint advertises (whole seconds)")
	flag.Var(&f.federate, "federate", "<trust-domain>=<https url>: fetch that trust domain's bundle from its bundle endpoint and trust it beside the local one; repeatable, each with its --federate-bundle")
	flag.Var(&f.bundles, "federate-bundle", "<trust-domain>=<PEM file>: the federated trust domain's bundle, handed over out of band, which authenticates its endpoint until the first fetch (certificates only); repeatable")
}

// federationJobs run beside the agent: the bundle endpoint and the
// fetcher, each nil when off.
type federationJobs struct {
	endpoint string
	server   *federation.Server
	fetcher  *federation.Fetcher
}

// apply wires the flags: a fetcher of the peers into opts.HTTP.Federated,
// the bundle endpoint's server. Both need the mTLS path (ca non-nil).
func (f *federationFlags) apply(opts *agent.Options, ca *identity.CA, svidTTL time.Duration, reg prometheus.Registerer, log *slog.Logger) (federationJobs, error) {
	var j federationJobs
	if *f.endpoint == "" && len(f.federate) == 0 && len(f.bundles) == 0 {
		return j, nil
	}
	if opts.HTTP == nil || ca == nil {
		return j, errors.New("--bundle-endpoint, --federate and --federate-bundle need the mTLS path with the embedded CA (--trust-domain, --ca-dir)")
	}
	local := opts.HTTP.TrustDomain
	peers, err := parsePeers(f.federate, f.bundles, local)
	if err != nil {
		return j, err
	}
	if len(peers) > 0 {
		j.fetcher, err = federation.NewFetcher(federation.FetcherConfig{Local: local, Peers: peers, Registerer: reg, Logger: log})
		if err != nil {
			return j, err
		}
		opts.HTTP.Federated = j.fetcher
	}
	if *f.endpoint != "" {
		if _, _, err := net.SplitHostPort(*f.endpoint); err != nil {
			return j, fmt.Errorf("--bundle-endpoint %q: want host:port: %w", *f.endpoint, err)
		}
		svid, err := identity.NewEndpointSVID(ca, federation.EndpointID(local), svidTTL)
		if err != nil {
			return j, fmt.Errorf("--bundle-endpoint: %w", err)
		}
		j.server, err = federation.NewServer(federation.ServerConfig{TrustDomain: local, Bundles: opts.HTTP.Identities, SVID: svid, RefreshHint: *f.hint, Logger: log})
		if err != nil {
			return j, fmt.Errorf("--bundle-refresh-hint: %w", err)
		}
		j.endpoint = *f.endpoint
	}
	return j, nil
}

// parsePeers joins each --federate with its --federate-bundle, refusing
// a value that does not parse, the local trust domain, a trust domain
// named twice, and a federated trust domain without its bundle or a
// bundle for one not federated.
func parsePeers(federate, bundles []string, local spiffeid.TrustDomain) ([]federation.Peer, error) {
	boot := map[spiffeid.TrustDomain]*x509bundle.Bundle{}
	for _, v := range bundles {
		td, file, err := splitTD("--federate-bundle", v, "<trust-domain>=<PEM file>")
		if err != nil {
			return nil, err
		}
		if _, ok := boot[td]; ok {
			return nil, fmt.Errorf("--federate-bundle %q: trust domain %q already has a bundle", v, td)
		}
		b, err := loadBundle(td, file)
		if err != nil {
			return nil, fmt.Errorf("--federate-bundle %q: %w", v, err)
		}
		boot[td] = b
	}
	var peers []federation.Peer
	seen := map[spiffeid.TrustDomain]bool{}
	for _, v := range federate {
		td, raw, err := splitTD("--federate", v, "<trust-domain>=<https url>")
		if err != nil {
			return nil, err
		}
		if td == local {
			return nil, fmt.Errorf("--federate %q: %q is the local trust domain (--trust-domain), whose bundle is the local CA's", v, td)
		}
		if seen[td] {
			return nil, fmt.Errorf("--federate %q: trust domain %q is federated twice", v, td)
		}
		seen[td] = true
		if _, err := federation.ParseEndpointURL(raw); err != nil {
			return nil, fmt.Errorf("--federate %q: %w", v, err)
		}
		b, ok := boot[td]
		if !ok {
			return nil, fmt.Errorf("--federate %q: no --federate-bundle %s=<PEM file> to authenticate its endpoint (https_spiffe) until the first fetch", v, td)
		}
		peers = append(peers, federation.Peer{TrustDomain: td, URL: raw, Bootstrap: b})
	}
	for td := range boot {
		if !seen[td] {
			return nil, fmt.Errorf("--federate-bundle %s=...: trust domain %q is not federated (no --federate %s=<https url>)", td, td, td)
		}
	}
	return peers, nil
}

// splitTD splits "<trust-domain>=<rest>".
func splitTD(flagName, v, want string) (spiffeid.TrustDomain, string, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || rest == "" {
		return spiffeid.TrustDomain{}, "", fmt.Errorf("%s %q: want %s", flagName, v, want)
	}
	td, err := federation.ParseTrustDomain(name)
	if err != nil {
		return spiffeid.TrustDomain{}, "", fmt.Errorf("%s %q: %w", flagName, v, err)
	}
	return td, rest, nil
}

// loadBundle reads a PEM file of td's X.509 authorities. A bundle is
// public: a private key in the file means the wrong file (a CA's own
// ca.pem, say), which is refused rather than read past.
func loadBundle(td spiffeid.TrustDomain, file string) (*x509bundle.Bundle, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	n := 0
	rest := data
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		n++
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %d is %q, want CERTIFICATE blocks alone: a bundle holds no key", file, n, blk.Type)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", file)
	}
	b, err := x509bundle.Parse(td, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}

// run serves the endpoint and runs the fetcher until ctx ends, sending a
// failure to errc.
func (j federationJobs) run(ctx context.Context, errc chan<- error, log *slog.Logger) error {
	if j.server != nil {
		l, err := net.Listen("tcp", j.endpoint)
		if err != nil {
			return fmt.Errorf("--bundle-endpoint %q: %w", j.endpoint, err)
		}
		log.Info("serving the SPIFFE bundle endpoint", "addr", l.Addr().String())
		go func() {
			if err := j.server.Serve(ctx, l); err != nil {
				errc <- err
			}
		}()
	}
	if j.fetcher != nil {
		go func() { _ = j.fetcher.Run(ctx) }()
	}
	return nil
}
