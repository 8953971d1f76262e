// What the suites read as witnesses on any provider: the apps' records of
// the peers' XFCC, and the listeners each proxy reports serving.

package cluster

import (
	"context"
	"fmt"
	"strings"
)

// NoXFCC is PeerURI's answer for a request that carried no XFCC URI.
const NoXFCC = "(no XFCC)"

// PeerURI is the peer's URI in an x-forwarded-client-cert value, as the
// destination proxy stamped it, or NoXFCC.
func PeerURI(xfcc string) string {
	_, uri, found := strings.Cut(xfcc, "URI=")
	if !found {
		return NoXFCC
	}
	return uri
}

// AppXFCC reads namespace/pod's app record: per peer URI in the XFCC, the
// HTTP requests whose payload (authority and path) starts with prefix.
func AppXFCC(ctx context.Context, c Cluster, namespace, pod, prefix string) (map[string]int, error) {
	p, err := PodNamed(c, namespace, pod)
	if err != nil {
		return nil, err
	}
	recs, err := c.Records(ctx, p)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, rec := range recs {
		if rec.Event == "http" && strings.HasPrefix(rec.Payload, prefix) {
			out[PeerURI(rec.XFCC)]++
		}
	}
	return out, nil
}

// ListenersServed checks that each node's proxy reports, on its metrics,
// every listener want names for it; the error names the first missing.
func ListenersServed(ctx context.Context, c Cluster, want map[string][]string) error {
	var last error
	for nodeName, ls := range want {
		body, err := c.Metrics(ctx, nodeName, Proxy)
		for _, l := range ls {
			if err == nil && !strings.Contains(body, `listener="`+l+`"`) {
				err = fmt.Errorf("no listener %s on %s's proxy yet", l, nodeName)
			}
		}
		if err != nil {
			last = err
		}
	}
	return last
}
