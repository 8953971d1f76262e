package hcm

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	netsetfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Names Envoy registers.
const (
	SetFilterStateFilter = xdsnames.SetFilterStateNetwork
	// StringFactory builds a StringAccessorImpl, which is not Hashable;
	// HashableStringFactory builds one that is.
	StringFactory         = xdsnames.StringFactory
	HashableStringFactory = xdsnames.HashableStringFactory
)

// FilterState is one object a listener stamps on every new connection.
type FilterState struct {
	Key, Value string
	// Hashable objects shared with upstream fold into the upstream pool
	// key (Envoy: TransportSocketOptions hashKey takes only Hashable
	// shared objects); others select a certificate without splitting it.
	Hashable bool
	// Shared is shared_with_upstream ONCE or TRANSITIVE: the upstream
	// transport socket sees the object.
	Shared bool
}

// FilterStateFromFilter compiles a network set_filter_state filter: only
// on_new_connection, each value a literal inline string.
func FilterStateFromFilter(f *listenerv3.Filter, path string) ([]FilterState, error) {
	if err := fields.Only(f, path, "name", "typed_config"); err != nil {
		return nil, err
	}
	var c netsetfsv3.Config
	if f.GetName() != SetFilterStateFilter || f.GetTypedConfig().UnmarshalTo(&c) != nil {
		return nil, fmt.Errorf("%s (%q): not an %s Config", path, f.GetName(), SetFilterStateFilter)
	}
	path += ".typed_config"
	if err := c.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(&c, path, "on_new_connection"); err != nil {
		return nil, err
	}
	var out []FilterState
	for i, v := range c.GetOnNewConnection() {
		vp := fmt.Sprintf("%s.on_new_connection[%d]", path, i)
		fs, err := filterStateValue(v, vp)
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

func filterStateValue(v *setfsv3.FilterStateValue, vp string) (FilterState, error) {
	if err := fields.Only(v, vp, "object_key", "factory_key", "format_string", "shared_with_upstream"); err != nil {
		return FilterState{}, err
	}
	fs := FilterState{Key: v.GetObjectKey()}
	switch v.GetFactoryKey() {
	case HashableStringFactory:
		fs.Hashable = true
	case StringFactory, "":
	default:
		return FilterState{}, fmt.Errorf("%s.factory_key: %q is not supported, only %s and %s", vp, v.GetFactoryKey(), StringFactory, HashableStringFactory)
	}
	f := v.GetFormatString()
	if err := fields.Only(f, vp+".format_string", "text_format_source"); err != nil {
		return FilterState{}, err
	}
	src := f.GetTextFormatSource()
	if err := fields.Only(src, vp+".format_string.text_format_source", "inline_string"); err != nil {
		return FilterState{}, err
	}
	fs.Value = src.GetInlineString()
	if fs.Value == "" {
		return FilterState{}, fmt.Errorf("%s.format_string.text_format_source.inline_string: empty", vp)
	}
	for _, r := range fs.Value {
		if r == '%' {
			return FilterState{}, fmt.Errorf("%s.format_string.text_format_source.inline_string: %q has a command operator; only literal values are supported", vp, fs.Value)
		}
	}
	fs.Shared = v.GetSharedWithUpstream() != setfsv3.FilterStateValue_NONE
	return fs, nil
}
