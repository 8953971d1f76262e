package agent

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aether-mesh/aether/mesh/constants"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// ConfigDump is the JSON form of a node's configuration: the golden files,
// /debug/config and the state dir all use it.
type ConfigDump struct {
	Node      string                       `json:"node"`
	Mode      constants.CaptureMode        `json:"mode"`
	Version   string                       `json:"version,omitempty"`
	Resources map[string][]json.RawMessage `json:"resources"`
}

// DumpResources renders resources as indented, stable JSON: types and
// resources in name order, each resource in protojson. protojson varies its
// whitespace on purpose, so every resource is compacted before the whole is
// indented once. Secrets are redacted, as Envoy's config_dump redacts
// them: their PEM (keys, and certificates that differ every issuance) is
// replaced by a marker, so /debug/config leaks no key and golden files are
// stable.
func DumpResources(node string, mode constants.CaptureMode, version string, res map[resource.Type][]types.Resource) ([]byte, error) {
	return dumpResources(node, mode, version, res, true)
}

// Redacted is what a dumped secret's PEM reads.
const Redacted = "[redacted]"

func dumpResources(node string, mode constants.CaptureMode, version string, res map[resource.Type][]types.Resource, redact bool) ([]byte, error) {
	d := ConfigDump{Node: node, Mode: mode, Version: version, Resources: map[string][]json.RawMessage{}}
	for typ, list := range res {
		type named struct {
			name string
			raw  json.RawMessage
		}
		var items []named
		for _, r := range list {
			if s, ok := r.(*tlsv3.Secret); ok && redact {
				r = redactSecret(s)
			}
			b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("failed to encode %s %q: %w", typ, resourceName(r), err)
			}
			items = append(items, named{resourceName(r), b})
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].name < items[j].name })
		raws := make([]json.RawMessage, len(items))
		for i, it := range items {
			raws[i] = it.raw
		}
		d.Resources[typ] = raws
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode config dump for node %q: %w", node, err)
	}
	return append(out, '\n'), nil
}

// ParseDump reads a ConfigDump back into resources (the state dir's
// last-good.json). Errors name the file and the resource.
func ParseDump(file string, data []byte) (*ConfigDump, map[resource.Type][]types.Resource, error) {
	var d ConfigDump
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, nil, fmt.Errorf("%s: not a config dump: %w", file, err)
	}
	res := map[resource.Type][]types.Resource{}
	for typ, raws := range d.Resources {
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: resources[%q]: unknown type: %w", file, typ, err)
		}
		list := make([]types.Resource, 0, len(raws))
		for i, raw := range raws {
			m := mt.New().Interface()
			if err := protojson.Unmarshal(raw, m); err != nil {
				return nil, nil, fmt.Errorf("%s: resources[%q][%d]: %w", file, typ, i, err)
			}
			list = append(list, m)
		}
		res[typ] = list
	}
	return &d, res, nil
}

func resourceName(r types.Resource) string {
	if n, ok := r.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	if n, ok := r.(interface{ GetClusterName() string }); ok {
		return n.GetClusterName()
	}
	return ""
}

// redactSecret is a copy of s with every inline PEM replaced by Redacted.
func redactSecret(s *tlsv3.Secret) *tlsv3.Secret {
	c := proto.Clone(s).(*tlsv3.Secret)
	redact := func(ds *corev3.DataSource) {
		if ds != nil {
			ds.Specifier = &corev3.DataSource_InlineString{InlineString: Redacted}
		}
	}
	if tc := c.GetTlsCertificate(); tc != nil {
		redact(tc.CertificateChain)
		redact(tc.PrivateKey)
	}
	if tc := c.GetValidationContext().GetCustomValidatorConfig().GetTypedConfig(); tc != nil {
		var cfg tlsv3.SPIFFECertValidatorConfig
		if tc.UnmarshalTo(&cfg) == nil {
			for _, td := range cfg.TrustDomains {
				redact(td.TrustBundle)
			}
			if a, err := anypb.New(&cfg); err == nil {
				c.GetValidationContext().GetCustomValidatorConfig().TypedConfig = a
			}
		}
	}
	return c
}
