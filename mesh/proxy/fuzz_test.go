package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
)

// The types a control plane sends on the proxy's stream, in the order a
// fuzzed kind picks them. Routes are not a type of their own here: they
// ride inline in the connection managers of the listeners, so a route
// reaches the proxy inside an LDS response; an RDS response is refused as
// a type the data plane does not serve.
var fuzzTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.SecretType, resource.RouteType}

// kindName is how a NACK names a resource of each type.
var kindName = map[string]string{
	resource.ClusterType:  "Cluster",
	resource.EndpointType: "ClusterLoadAssignment",
	resource.ListenerType: "Listener",
	resource.SecretType:   "Secret",
}

// goodConfig is what an agent published for node-a of the mTLS and
// east-west golden scenario (fixtures/xds), with real secrets in place
// of the golden file's redacted ones: the last good configuration a bad
// update must leave running.
type goodConfig map[string][]*discoveryv3.Resource

// loadGoodConfig reads the golden snapshot and issues the secrets it
// names from a fresh CA.
func loadGoodConfig(tb testing.TB) goodConfig {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "xds", "eastwest.node-a.quic.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var g struct {
		Resources map[string][]json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		tb.Fatal(err)
	}
	out := goodConfig{}
	for _, typ := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType} {
		for _, raw := range g.Resources[typ] {
			mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ)
			if err != nil {
				tb.Fatal(err)
			}
			m := mt.New().Interface()
			if err := protojson.Unmarshal(raw, m); err != nil {
				tb.Fatalf("golden %s: %v", typ, err)
			}
			out.add(tb, typ, m)
		}
	}
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		tb.Fatal(err)
	}
	for _, raw := range g.Resources[resource.SecretType] {
		var s struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			tb.Fatal(err)
		}
		if !strings.HasPrefix(s.Name, "spiffe://") {
			continue
		}
		var acct identity.Account
		if _, err := fmt.Sscanf(strings.ReplaceAll(strings.TrimPrefix(s.Name, "spiffe://aether.test/"), "/", " "), "ns %s sa %s", &acct.Namespace, &acct.ServiceAccount); err != nil {
			tb.Fatalf("golden secret %q: %v", s.Name, err)
		}
		svid, err := ca.Issue(identity.Request{Account: acct, TTL: time.Hour})
		if err != nil {
			tb.Fatal(err)
		}
		sec, err := mtls.SVIDSecret(svid)
		if err != nil {
			tb.Fatal(err)
		}
		out.add(tb, resource.SecretType, sec)
	}
	bundle, err := mtls.BundleSecret([]*x509bundle.Bundle{ca.Bundle()})
	if err != nil {
		tb.Fatal(err)
	}
	out.add(tb, resource.SecretType, bundle)
	return out
}

func (g goodConfig) add(tb testing.TB, typ string, m proto.Message) {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	name := m.ProtoReflect().Descriptor().Fields().ByName("name")
	if typ == resource.EndpointType {
		name = m.ProtoReflect().Descriptor().Fields().ByName("cluster_name")
	}
	g[typ] = append(g[typ], &discoveryv3.Resource{Name: m.ProtoReflect().Get(name).String(), Version: "good", Resource: a})
}

// fuzzProxy is an offline proxy (no stream, no sockets: a listener
// "opens" without binding anything, so no fuzzed address is ever bound)
// running the good configuration.
func fuzzProxy(tb testing.TB, good goodConfig) *Proxy {
	tb.Helper()
	p := New(Options{Node: "node-a", XDS: "unix:///nonexistent", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p.sub = &recording{subs: map[string][]string{}}
	p.listen = func(*listener.Spec) (running, error) { return running{}, nil }
	for _, typ := range []string{resource.ClusterType, resource.EndpointType, resource.SecretType, resource.ListenerType} {
		if err := p.OnUpdate(typ, good[typ], nil); err != nil {
			tb.Fatalf("the good configuration's %s is refused: %v", typ, err)
		}
	}
	return p
}

// runningConfig is what a proxy serves, by identity: a refused update must
// leave every entry the very object it was.
type runningConfig struct {
	active, warming map[string]*cluster.Cluster
	endpoints       map[string][]cluster.Endpoint
	specs           map[string]*listener.Spec
	secrets         map[string]any
}

func (p *Proxy) runningConfig(good goodConfig) runningConfig {
	p.mu.Lock()
	rc := runningConfig{active: maps.Clone(p.active), warming: maps.Clone(p.warming), specs: maps.Clone(p.specs), endpoints: map[string][]cluster.Endpoint{}, secrets: map[string]any{}}
	for n, c := range p.active {
		rc.endpoints[n] = c.Endpoints()
	}
	p.mu.Unlock()
	for _, r := range good[resource.SecretType] {
		if c, err := p.secrets.Certificate(r.GetName()); err == nil {
			rc.secrets[r.GetName()] = c
		} else {
			rc.secrets[r.GetName()] = p.secrets.HasBundle(r.GetName(), spiffeid.RequireTrustDomainFromString("aether.test"))
		}
	}
	return rc
}

func (a runningConfig) diff(b runningConfig) string {
	var d []string
	if !maps.Equal(a.active, b.active) {
		d = append(d, "active clusters")
	}
	if !maps.Equal(a.warming, b.warming) {
		d = append(d, "warming clusters")
	}
	if !maps.EqualFunc(a.endpoints, b.endpoints, slices.Equal) {
		d = append(d, "endpoints")
	}
	if !maps.Equal(a.specs, b.specs) {
		d = append(d, "listeners")
	}
	if !maps.Equal(a.secrets, b.secrets) {
		d = append(d, "secrets")
	}
	return strings.Join(d, ", ")
}

// nackNames is the shape of every NACK: the resource's kind and quoted
// name, then the field path (".x", "[i]") or what is wrong with it (": ").
var nackNames = regexp.MustCompile(`^(Cluster|ClusterLoadAssignment|Listener|Secret) "(?:[^"\\]|\\.)*"(\.|\[|: )`)

// checkUpdate sends one fuzzed resource and, when it is refused, checks
// the NACK names the resource and the field, and that the good
// configuration runs on untouched.
func checkUpdate(t *testing.T, good goodConfig, kind uint8, name string, value []byte) {
	p := fuzzProxy(t, good)
	defer p.Close()
	typ := fuzzTypes[int(kind&0x07)%len(fuzzTypes)]
	// A control plane can also put one type's resource in another type's
	// response, or send a resource with no body at all.
	anyType := typ
	if kind&0x08 != 0 {
		anyType = fuzzTypes[(int(kind&0x07)+1)%len(fuzzTypes)]
	}
	r := &discoveryv3.Resource{Name: name, Version: "fuzz"}
	if kind&0x10 == 0 {
		r.Resource = &anypb.Any{TypeUrl: anyType, Value: value}
	}
	before := p.runningConfig(good)
	err := p.OnUpdate(typ, []*discoveryv3.Resource{r}, nil)
	if err == nil {
		// Applied: the proxy must still take its good configuration.
		for _, typ := range []string{resource.ClusterType, resource.EndpointType, resource.SecretType, resource.ListenerType} {
			if err := p.OnUpdate(typ, good[typ], nil); err != nil {
				t.Fatalf("after an accepted %s update, the good %s is refused: %v", typ, typ, err)
			}
		}
		return
	}
	msg := err.Error()
	if _, known := kindName[typ]; !known {
		if !strings.Contains(msg, typ) {
			t.Fatalf("NACK of an unserved type %s does not name it: %q", typ, msg)
		}
	} else if !nackNames.MatchString(msg) || !strings.HasPrefix(msg, kindName[typ]+" ") {
		t.Fatalf("NACK of a %s does not name the resource and the field: %q", kindName[typ], msg)
	}
	if d := before.diff(p.runningConfig(good)); d != "" {
		t.Fatalf("a refused %s update (%q) changed the running configuration: %s", typ, msg, d)
	}
}

// A hostile or broken control plane never crashes the proxy: any bytes in
// any resource of any response are either applied or NACKed with an error
// naming the resource and the field, and a NACK leaves the last good
// configuration running as it was. The seeds are every resource of the
// golden snapshots (what real agents publish), each under its own type.
func FuzzXDSUpdate(f *testing.F) {
	good := loadGoodConfig(f)
	files, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "xds", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden snapshots (%v)", err)
	}
	seeds := goodConfig{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var g struct {
			Resources map[string][]json.RawMessage `json:"resources"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			f.Fatal(err)
		}
		for typ, raws := range g.Resources {
			mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ)
			if err != nil {
				f.Fatal(err)
			}
			for _, raw := range raws {
				m := mt.New().Interface()
				if err := protojson.Unmarshal(raw, m); err != nil {
					f.Fatalf("%s: %v", file, err)
				}
				seeds.add(f, typ, m)
			}
		}
	}
	for typ, rs := range good {
		seeds[typ] = append(seeds[typ], rs...)
	}
	for i, typ := range fuzzTypes {
		for _, r := range seeds[typ] {
			f.Add(uint8(i), r.GetName(), r.GetResource().GetValue())
		}
	}
	f.Add(uint8(0x10), "no-body", []byte(nil))
	f.Add(uint8(0x08|2), "listener-in-a-secret", good[resource.ListenerType][0].GetResource().GetValue())
	f.Add(uint8(4), "route", []byte{})
	f.Fuzz(func(t *testing.T, kind uint8, name string, value []byte) {
		checkUpdate(t, good, kind, name, value)
	})
}

// A good configuration survives a bad update of each type: the NACK names
// the resource and the field, and every cluster, endpoint, listener and
// secret that ran before is the one that runs after.
func TestBadUpdateKeepsLastGoodConfig(t *testing.T) {
	good := loadGoodConfig(t)
	p := fuzzProxy(t, good)
	defer p.Close()
	before := p.runningConfig(good)
	if len(before.active) == 0 || len(before.specs) == 0 || len(before.secrets) == 0 {
		t.Fatalf("broken rig: the good configuration runs %d clusters, %d listeners, %d secrets", len(before.active), len(before.specs), len(before.secrets))
	}
	for _, c := range []struct {
		typ, want string
		edit      func(m proto.Message)
	}{
		{resource.ClusterType, ".respect_dns_ttl", func(m proto.Message) { m.(*clusterv3.Cluster).RespectDnsTtl = true }},
		{resource.EndpointType, ".endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address", func(m proto.Message) {
			m.(*endpointv3.ClusterLoadAssignment).Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().Address = "not-an-ip"
		}},
		{resource.ListenerType, ".use_original_dst", func(m proto.Message) { m.(*listenerv3.Listener).UseOriginalDst = wrapperspb.Bool(true) }},
		{resource.SecretType, ".trust_domains[0].trust_bundle", func(m proto.Message) {
			var cfg tlsv3.SPIFFECertValidatorConfig
			cv := m.(*tlsv3.Secret).GetValidationContext().GetCustomValidatorConfig()
			if err := cv.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				t.Fatal(err)
			}
			cfg.TrustDomains[0].TrustBundle = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "not a PEM bundle"}}
			cv.TypedConfig, _ = anypb.New(&cfg)
		}},
	} {
		t.Run(kindName[c.typ], func(t *testing.T) {
			good0 := good[c.typ][len(good[c.typ])-1]
			m, err := good0.GetResource().UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			a, err := anypb.New(m)
			if err != nil {
				t.Fatal(err)
			}
			// The bad resource comes with the good ones, as a whole
			// response: one bad resource refuses all of it.
			rs := append(slices.Clone(good[c.typ][:len(good[c.typ])-1]), &discoveryv3.Resource{Name: good0.GetName(), Version: "bad", Resource: a})
			err = p.OnUpdate(c.typ, rs, nil)
			if err == nil || !nackNames.MatchString(err.Error()) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a NACK naming %s %q and %s", err, kindName[c.typ], good0.GetName(), c.want)
			}
			if d := before.diff(p.runningConfig(good)); d != "" {
				t.Fatalf("the refused update changed the running configuration: %s", d)
			}
		})
	}
}
