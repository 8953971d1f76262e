package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/aether-mesh/aether/mesh/agent"
)

// pairFlags are the QUIC pair lifecycle's (ARCHITECTURE.md, "Pair
// lifecycle"), with its two test-only controls.
type pairFlags struct {
	fetchWindow                   *time.Duration
	proxyMetricsURL               *string
	pruneUnfetched, dropOnRemoval *bool
}

func (f *pairFlags) register() {
	f.fetchWindow = flag.Duration("east-west-quic-pair-fetch-window", agent.DefaultPairFetchWindow,
		"a persisted QUIC pair with no evidence of use (subscribed or held twin) this long after start is pruned with its twin; dormant pairs never are")
	f.proxyMetricsURL = flag.String("proxy-metrics-url", "",
		"the node proxy's loopback /metrics (http://127.0.0.1:15091/metrics), sampled every 10s and at each prune to count prunes of twins that served a request in the last minute; without it, prunes of twins with evidence of use in the last minute are counted")
	f.pruneUnfetched = flag.Bool("test-only-prune-unfetched-since-start", false,
		"TEST ONLY: the pre-#1073 rule: at the end of the fetch window prune every live pair whose twin was not fetched by name since start, held and re-subscribed twins included (live twins are pruned)")
	f.dropOnRemoval = flag.Bool("test-only-drop-pair-on-removal", false,
		"TEST ONLY: no dormant state (pre-#1036): drop a pair whose source account leaves the node or whose destination leaves the dependency set")
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
	opts.Controls.PruneUnfetchedSinceStart = *f.pruneUnfetched
	opts.Controls.DropPairOnRemoval = *f.dropOnRemoval
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
