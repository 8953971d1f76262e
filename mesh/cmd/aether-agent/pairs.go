package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/pairs"
)

// pairFlags are the QUIC pair lifecycle's (ARCHITECTURE.md, "Pair
// lifecycle"); its two test-only controls are controlFlags'.
type pairFlags struct {
	fetchWindow     *time.Duration
	proxyMetricsURL *string
}

func (f *pairFlags) register() {
	f.fetchWindow = flag.Duration("east-west-quic-pair-fetch-window", pairs.DefaultFetchWindow,
		"a persisted QUIC pair with no evidence of use (subscribed or held twin) this long after start is pruned with its twin; dormant pairs never are")
	f.proxyMetricsURL = flag.String("proxy-metrics-url", "",
		"the node proxy's loopback /metrics (http://127.0.0.1:15091/metrics), sampled every 10s and at each prune to count prunes of twins that served a request in the last minute; without it, prunes of twins with evidence of use in the last minute are counted")
}

// apply sets opts' pair lifecycle, refusing a window that is not
// positive and a metrics URL that is not the proxy's on loopback.
func (f *pairFlags) apply(opts *agent.Options) error {
	if *f.fetchWindow <= 0 {
		return fmt.Errorf("--east-west-quic-pair-fetch-window: %s is not a positive duration", *f.fetchWindow)
	}
	opts.PairFetchWindow = *f.fetchWindow
	if *f.proxyMetricsURL != "" {
		if err := loopbackHTTP(*f.proxyMetricsURL); err != nil {
			return fmt.Errorf("--proxy-metrics-url: %w", err)
		}
		opts.ProxyMetricsURL = *f.proxyMetricsURL
	}
	return nil
}

// loopbackHTTP checks that raw is an http URL on a loopback address: the
// proxy's metrics are the node's own, never read across the network.
func loopbackHTTP(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("%q: scheme %q, want http", raw, u.Scheme)
	}
	host, _, err := net.SplitHostPort(u.Host)
	if err != nil {
		return fmt.Errorf("%q: want http://<loopback ip>:<port>/...: %w", raw, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: %s is not a loopback address", raw, host)
	}
	return nil
}
