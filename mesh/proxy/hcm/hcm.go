// Package hcm compiles the HTTP filter chains of the mTLS path: the
// http_connection_manager (codec, inline routes by authority, XFCC, access
// log) and the network set_filter_state filter that stamps a listener's
// source identity on each connection (ARCHITECTURE.md, "The mTLS HTTP/2 path"). It only
// compiles; package h2 runs what it yields.
package hcm

import (
	"fmt"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/aether-mesh/aether/mesh/proxy/clusterspec"
	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/ondemand"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Names Envoy registers (mesh/xdsnames).
const (
	Filter       = xdsnames.HTTPConnectionManager
	RouterFilter = xdsnames.RouterFilter
)

// Codec is the downstream HTTP codec.
type Codec int

const (
	// Auto serves HTTP/1.1 and prior-knowledge h2c, as Envoy's AUTO
	// tells them apart by the connection preface.
	Auto Codec = iota
	// HTTP2 serves HTTP/2 only.
	HTTP2
	// HTTP3 serves HTTP/3: a QUIC listener's chains.
	HTTP3
)

// Config is a compiled HttpConnectionManager.
type Config struct {
	StatPrefix string
	Codec      Codec
	// SetXFCC is forward_client_cert_details SANITIZE_SET with the peer's
	// URI; otherwise SANITIZE: a client's XFCC never reaches the app.
	SetXFCC   bool
	Hosts     []*VirtualHost
	AccessLog *AccessLog
	// OnDemand is the on_demand filter's ODCDS timeout; zero is no
	// on_demand filter, and a missing cluster is answered at once.
	OnDemand time.Duration
	// StreamIdleTimeout is stream_idle_timeout: how long the proxy waits
	// for the next byte of a request's body before it answers 408 (or
	// resets the stream, once the response has begun). Unset is Envoy's
	// default, DefaultStreamIdleTimeout; zero disables it.
	StreamIdleTimeout time.Duration
}

// DefaultStreamIdleTimeout is Envoy's stream_idle_timeout when the field
// is unset.
const DefaultStreamIdleTimeout = 5 * time.Minute

// VirtualHost is one virtual host with a single "/" route: to a cluster or
// a direct response.
type VirtualHost struct {
	Name    string
	Domains []string
	Cluster string
	// Selector, set instead of Cluster, picks the cluster per source
	// (a MatcherClusterSpecifier choosing twins).
	Selector *clusterspec.Selector
	Direct   *Direct
}

// Direct is a direct_response.
type Direct struct {
	Status int
	Body   string
}

// Route returns the virtual host for authority as Envoy picks one: an
// exact domain (case-insensitive) first, then the catch-all "*".
func (c *Config) Route(authority string) (*VirtualHost, bool) {
	authority = strings.ToLower(authority)
	var star *VirtualHost
	for _, vh := range c.Hosts {
		for _, d := range vh.Domains {
			if d == "*" {
				if star == nil {
					star = vh
				}
				continue
			}
			if strings.ToLower(d) == authority {
				return vh, true
			}
		}
	}
	return star, star != nil
}

// Clusters lists the clusters the routes name.
func (c *Config) Clusters() []string {
	var out []string
	for _, vh := range c.Hosts {
		if vh.Cluster != "" {
			out = append(out, vh.Cluster)
		}
		// A selector's arms name twins fetched on demand; only its
		// fallback must be in CDS up front.
		if vh.Selector != nil && vh.Selector.Floor() != "" {
			out = append(out, vh.Selector.Floor())
		}
	}
	return out
}

// FromFilter compiles a chain's http_connection_manager filter.
func FromFilter(f *listenerv3.Filter, path string) (*Config, error) {
	if err := fields.Only(f, path, "name", "typed_config"); err != nil {
		return nil, err
	}
	var h hcmv3.HttpConnectionManager
	if f.GetName() != Filter || f.GetTypedConfig().UnmarshalTo(&h) != nil {
		return nil, fmt.Errorf("%s (%q): not an %s HttpConnectionManager (%s)", path, f.GetName(), Filter, f.GetTypedConfig().GetTypeUrl())
	}
	path += ".typed_config"
	if err := h.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(&h, path, "stat_prefix", "codec_type", "route_config", "http_filters", "access_log", "forward_client_cert_details", "set_current_client_cert_details", "stream_idle_timeout"); err != nil {
		return nil, err
	}
	c := &Config{StatPrefix: h.GetStatPrefix(), StreamIdleTimeout: DefaultStreamIdleTimeout}
	if d := h.GetStreamIdleTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fmt.Errorf("%s.stream_idle_timeout: %w", path, err)
		}
		c.StreamIdleTimeout = d.AsDuration()
		if c.StreamIdleTimeout < 0 {
			return nil, fmt.Errorf("%s.stream_idle_timeout: %v is negative", path, c.StreamIdleTimeout)
		}
	}
	switch h.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO:
		c.Codec = Auto
	case hcmv3.HttpConnectionManager_HTTP2:
		c.Codec = HTTP2
	case hcmv3.HttpConnectionManager_HTTP3:
		c.Codec = HTTP3
	default:
		return nil, fmt.Errorf("%s.codec_type: %s is not supported, only AUTO, HTTP2 and HTTP3", path, h.GetCodecType())
	}
	if err := xfcc(&h, c, path); err != nil {
		return nil, err
	}
	filters := h.GetHttpFilters()
	if len(filters) > 1 && filters[0].GetName() == xdsnames.OnDemandFilter {
		fp := path + ".http_filters[0]"
		if err := fields.Only(filters[0], fp, "name", "typed_config"); err != nil {
			return nil, err
		}
		d, err := ondemand.TimeoutFromProto(filters[0].GetTypedConfig(), fp+".typed_config")
		if err != nil {
			return nil, err
		}
		c.OnDemand = d
		filters = filters[1:]
	}
	if err := router(filters, path+".http_filters"); err != nil {
		return nil, err
	}
	hosts, err := routes(h.GetRouteConfig(), path+".route_config")
	if err != nil {
		return nil, err
	}
	c.Hosts = hosts
	al, err := accessLog(h.GetAccessLog(), path+".access_log")
	if err != nil {
		return nil, err
	}
	c.AccessLog = al
	return c, nil
}

func xfcc(h *hcmv3.HttpConnectionManager, c *Config, path string) error {
	switch h.GetForwardClientCertDetails() {
	case hcmv3.HttpConnectionManager_SANITIZE:
		if h.GetSetCurrentClientCertDetails() != nil {
			return fmt.Errorf("%s.set_current_client_cert_details: set while forward_client_cert_details is SANITIZE, which never sets XFCC", path)
		}
		return nil
	case hcmv3.HttpConnectionManager_SANITIZE_SET:
	default:
		return fmt.Errorf("%s.forward_client_cert_details: %s is not supported, only SANITIZE and SANITIZE_SET", path, h.GetForwardClientCertDetails())
	}
	sc := h.GetSetCurrentClientCertDetails()
	if err := fields.Only(sc, path+".set_current_client_cert_details", "uri"); err != nil {
		return err
	}
	if !sc.GetUri() {
		return fmt.Errorf("%s.set_current_client_cert_details.uri: false; SANITIZE_SET here carries the peer's URI, so it must be true", path)
	}
	c.SetXFCC = true
	return nil
}

func router(fs []*hcmv3.HttpFilter, path string) error {
	if len(fs) != 1 {
		return fmt.Errorf("%s: %d filters, want exactly one %s", path, len(fs), RouterFilter)
	}
	f := fs[0]
	if err := fields.Only(f, path+"[0]", "name", "typed_config"); err != nil {
		return err
	}
	var r routerv3.Router
	if f.GetName() != RouterFilter || f.GetTypedConfig().UnmarshalTo(&r) != nil {
		return fmt.Errorf("%s[0] (%q): not an %s Router", path, f.GetName(), RouterFilter)
	}
	return fields.Only(&r, path+"[0].typed_config")
}

func routes(rc *routev3.RouteConfiguration, path string) ([]*VirtualHost, error) {
	if rc == nil {
		return nil, fmt.Errorf("%s: missing; this data plane takes an inline route_config (no RDS)", path)
	}
	if err := fields.Only(rc, path, "name", "virtual_hosts"); err != nil {
		return nil, err
	}
	seen := map[string]string{}
	var out []*VirtualHost
	for i, vh := range rc.GetVirtualHosts() {
		vp := fmt.Sprintf("%s.virtual_hosts[%d] (%q)", path, i, vh.GetName())
		if err := fields.Only(vh, vp, "name", "domains", "routes"); err != nil {
			return nil, err
		}
		v := &VirtualHost{Name: vh.GetName(), Domains: vh.GetDomains()}
		for j, d := range vh.GetDomains() {
			if d != "*" && strings.Contains(d, "*") {
				return nil, fmt.Errorf("%s.domains[%d]: wildcard %q is not supported, only exact domains and \"*\"", vp, j, d)
			}
			// Envoy refuses a route table in which two virtual hosts claim
			// one domain.
			if other, dup := seen[strings.ToLower(d)]; dup {
				return nil, fmt.Errorf("%s.domains[%d]: %q is also a domain of %s", vp, j, d, other)
			}
			seen[strings.ToLower(d)] = vp
		}
		if err := route(vh.GetRoutes(), v, vp+".routes"); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func route(rs []*routev3.Route, v *VirtualHost, path string) error {
	if len(rs) != 1 {
		return fmt.Errorf("%s: %d routes, want exactly one prefix \"/\" route", path, len(rs))
	}
	r := rs[0]
	rp := path + "[0]"
	if err := fields.Only(r, rp, "match", "route", "direct_response"); err != nil {
		return err
	}
	if err := fields.Only(r.GetMatch(), rp+".match", "prefix"); err != nil {
		return err
	}
	if r.GetMatch().GetPrefix() != "/" {
		return fmt.Errorf("%s.match.prefix: %q, only \"/\" is supported", rp, r.GetMatch().GetPrefix())
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		if err := fields.Only(a.Route, rp+".route", "cluster", "inline_cluster_specifier_plugin"); err != nil {
			return err
		}
		if a.Route.GetInlineClusterSpecifierPlugin() != nil {
			sel, err := clusterspec.FromProto(a.Route, rp+".route")
			if err != nil {
				return err
			}
			v.Selector = sel
			break
		}
		v.Cluster = a.Route.GetCluster()
	case *routev3.Route_DirectResponse:
		dr := a.DirectResponse
		if err := fields.Only(dr, rp+".direct_response", "status", "body"); err != nil {
			return err
		}
		if b := dr.GetBody(); b != nil {
			if err := fields.Only(b, rp+".direct_response.body", "inline_string"); err != nil {
				return err
			}
		}
		v.Direct = &Direct{Status: int(dr.GetStatus()), Body: dr.GetBody().GetInlineString()}
	default:
		return fmt.Errorf("%s: neither route nor direct_response", rp)
	}
	return nil
}
