package cni

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// conventionKeys are top-level keys the CNI spec and its conventions give
// every plugin's configuration without a field in the library's types:
// args, ipMasq and runtimeConfig (CONVENTIONS.md), cniVersions (1.1's list
// form), and cni.dev/attachments, the misspelt name libcni's GC also injects
// beside cni.dev/valid-attachments.
var conventionKeys = []string{"args", "ipMasq", "runtimeConfig", "cniVersions", "cni.dev/attachments"}

// specKeys are the keys the spec owns: the fields of the library's plugin
// and list configuration types, and the conventions.
var specKeys = jsonKeys(slices.Clone(conventionKeys), reflect.TypeFor[types.PluginConf](), reflect.TypeFor[types.NetConfList]())

// pluginKeys are the keys Config adds to the spec's.
var pluginKeys = jsonKeys(nil, reflect.TypeFor[Config]())

// jsonKeys appends the JSON names of the exported, non-embedded fields of
// each struct type.
func jsonKeys(keys []string, ts ...reflect.Type) []string {
	for _, t := range ts {
		for f := range t.Fields() {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "-" && name != "" {
				keys = append(keys, name)
			}
		}
	}
	return keys
}

// checkKeys answers an error naming every top-level key that neither the
// spec nor the plugin defines. encoding/json drops such a key silently, so
// a misspelt captureMode would install the default mode.
func checkKeys(stdin []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &top); err != nil {
		return types.NewError(types.ErrDecodingFailure, "failed to parse network configuration", err.Error())
	}
	var msgs []string
	for k := range top {
		if slices.Contains(specKeys, k) || slices.Contains(pluginKeys, k) {
			continue
		}
		msg := fmt.Sprintf("unknown configuration key %q", k)
		if s := suggest(k, pluginKeys); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return nil
	}
	slices.Sort(msgs)
	return types.NewError(types.ErrInvalidNetworkConfig, strings.Join(msgs, "; "),
		fmt.Sprintf("aether-cni accepts the CNI spec's keys and %s", strings.Join(pluginKeys, ", ")))
}

// hasKey reports whether the configuration has the top-level key, even as
// null.
func hasKey(stdin []byte, key string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(stdin, &top) != nil {
		return false
	}
	_, ok := top[key]
	return ok
}

// suggest returns the candidate closest to k when it is at most two edits
// away, ignoring case; "" when none is.
func suggest(k string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
