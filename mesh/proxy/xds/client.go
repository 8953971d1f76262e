// Package xds is the proxy's delta ADS client: one gRPC
// DeltaAggregatedResources stream to the agent carrying every resource
// type, as Envoy's ADS mux does. It subscribes (wildcard or by name), hands
// each response to a handler, ACKs what the handler applied and NACKs what
// it refused with an error_detail, and on a fresh stream states every held
// resource in initial_resource_versions so the server sends only changes.
package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// Wildcard is the explicit delta-xDS wildcard subscription.
const Wildcard = "*"

// Handler applies one response's resources. A non-nil error rejects the
// whole response: nothing of it may have been applied, and it is NACKed.
type Handler interface {
	OnUpdate(typeURL string, resources []*discoveryv3.Resource, removed []string) error
}

// Client is a delta ADS client.
type Client struct {
	// Target is a gRPC target: unix:///path/to.sock or host:port.
	Target  string
	Node    *corev3.Node
	Handler Handler
	Log     *slog.Logger
	// Observe, when set, is told the outcome of every response.
	Observe func(typeURL string, acked bool)

	mu     sync.Mutex
	subs   map[string]*subscription
	order  []string
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	sendMu sync.Mutex
}

type subscription struct {
	names    map[string]bool
	versions map[string]string
}

// Subscribe sets the resource names of typeURL this client wants; Wildcard
// (or no names at all) subscribes to every resource of the type. Types are
// requested on a new stream in the order they were first subscribed. On a
// live stream the change is sent at once.
func (c *Client) Subscribe(typeURL string, names ...string) error {
	if len(names) == 0 {
		names = []string{Wildcard}
	}
	return c.Want(typeURL, names...)
}

// Want sets the resource names of typeURL this client wants, as Subscribe
// does, except that no names means none, not wildcard: on a live stream
// the names held so far are unsubscribed, and a fresh stream sends no
// request for the type until it wants a name again (an empty initial
// request would read as wildcard). Envoy's EDS does the same when its
// last EDS cluster goes.
func (c *Client) Want(typeURL string, names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		c.subs = map[string]*subscription{}
	}
	s, ok := c.subs[typeURL]
	if !ok {
		s = &subscription{names: map[string]bool{}, versions: map[string]string{}}
		c.subs[typeURL] = s
		c.order = append(c.order, typeURL)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var add, drop []string
	for n := range want {
		if !s.names[n] {
			add = append(add, n)
		}
	}
	for n := range s.names {
		if !want[n] {
			drop = append(drop, n)
			delete(s.versions, n)
		}
	}
	s.names = want
	if (len(add) == 0 && len(drop) == 0) || c.stream == nil {
		return nil
	}
	slices.Sort(add)
	slices.Sort(drop)
	return c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: drop})
}

func (c *Client) send(req *discoveryv3.DeltaDiscoveryRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.stream == nil {
		return errors.New("no ADS stream")
	}
	if err := c.stream.Send(req); err != nil {
		return fmt.Errorf("failed to send %s request to %s: %w", req.GetTypeUrl(), c.Target, err)
	}
	return nil
}

// Run keeps a stream to the agent open until ctx ends, reconnecting with
// backoff. It returns nil when ctx is done.
func (c *Client) Run(ctx context.Context) error {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := c.runStream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		c.Log.Warn("ADS stream ended, reconnecting", "target", c.Target, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (c *Client) runStream(ctx context.Context) error {
	conn, err := grpc.NewClient(c.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("failed to dial ADS at %q: %w", c.Target, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(sctx)
	if err != nil {
		return fmt.Errorf("failed to open DeltaAggregatedResources on %q: %w", c.Target, err)
	}
	if err := c.start(stream); err != nil {
		return err
	}
	defer func() {
		c.mu.Lock()
		c.sendMu.Lock()
		c.stream = nil
		c.sendMu.Unlock()
		c.mu.Unlock()
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("ADS stream from %q: %w", c.Target, err)
		}
		if err := c.handle(resp); err != nil {
			return err
		}
	}
}

// start sends one initial request per subscribed type, with the node on
// the first and every held version, and only then installs the stream:
// one whose initial requests fail is never used, so a later Subscribe is
// recorded for the next stream instead of sent on a dead one. c.mu is held
// throughout, so no Subscribe interleaves with the initial requests.
func (c *Client) start(stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) == 0 {
		return errors.New("no subscriptions: Subscribe before Run")
	}
	first := true
	for _, t := range c.order {
		s := c.subs[t]
		if len(s.names) == 0 {
			// Wants nothing: an empty request would read as wildcard.
			continue
		}
		req := &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                 t,
			ResourceNamesSubscribe:  slices.Sorted(maps.Keys(s.names)),
			InitialResourceVersions: maps.Clone(s.versions),
		}
		if first {
			req.Node, first = c.Node, false
		}
		if err := stream.Send(req); err != nil {
			return fmt.Errorf("failed to send the initial %s request to %s: %w", t, c.Target, err)
		}
	}
	c.sendMu.Lock()
	c.stream = stream
	c.sendMu.Unlock()
	return nil
}

func (c *Client) handle(resp *discoveryv3.DeltaDiscoveryResponse) error {
	t := resp.GetTypeUrl()
	err := c.Handler.OnUpdate(t, resp.GetResources(), resp.GetRemovedResources())
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResponseNonce: resp.GetNonce()}
	if err != nil {
		ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		c.Log.Warn("xds update rejected", "type", t, "nonce", resp.GetNonce(), "version", resp.GetSystemVersionInfo(), "resources", len(resp.GetResources()), "removed", len(resp.GetRemovedResources()), "err", err)
	} else {
		c.mu.Lock()
		if s := c.subs[t]; s != nil {
			for _, r := range resp.GetResources() {
				s.versions[r.GetName()] = r.GetVersion()
			}
			for _, n := range resp.GetRemovedResources() {
				delete(s.versions, n)
			}
		}
		c.mu.Unlock()
		c.Log.Info("xds update applied", "type", t, "nonce", resp.GetNonce(), "version", resp.GetSystemVersionInfo(), "resources", names(resp.GetResources()), "removed", resp.GetRemovedResources())
	}
	if c.Observe != nil {
		c.Observe(t, err == nil)
	}
	return c.send(ack)
}

func names(rs []*discoveryv3.Resource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.GetName())
	}
	return out
}

// Versions returns the versions held for typeURL, as a fresh stream would
// state them in initial_resource_versions.
func (c *Client) Versions(typeURL string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.subs[typeURL]; s != nil {
		return maps.Clone(s.versions)
	}
	return nil
}
