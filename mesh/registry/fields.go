package registry

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// scenarioLists names, for each top-level list of a scenario, the kind of
// object its entries are and the keys that name one, so an unknown field is
// reported on the object a reader knows ("service demo/svc-a"), not on an
// index.
var scenarioLists = map[string]struct {
	kind       string
	name       string // the entry's key holding its name
	namespaced bool   // named "namespace/name", the namespace defaulting to "default"
	inMeta     bool   // name and namespace sit under metadata
}{
	"nodes":           {kind: "node", name: "name"},
	"serviceAccounts": {kind: "serviceAccount", name: "name", namespaced: true},
	"pods":            {kind: "pod", name: "name", namespaced: true},
	"services":        {kind: "service", name: "name", namespaced: true},
	"endpoints":       {kind: "endpoints", name: "service", namespaced: true},
	"udpRoutes":       {kind: "udpRoute", name: "name", namespaced: true, inMeta: true},
}

var errUnknownField = errors.New("unknown field")

// unknownFields walks a decoded scenario (JSON values: maps, slices,
// scalars) against the Scenario type and returns a FieldError for every key
// the type does not have, by exact name: encoding/json would match keys
// case-insensitively and report only the key.
func unknownFields(file string, doc any) []error {
	top, ok := doc.(map[string]any)
	if !ok {
		return nil // not a mapping: the typed decode says why
	}
	st := reflect.TypeFor[Scenario]()
	var errs []error
	for _, k := range sortedKeys(top) {
		f, ok := jsonField(st, k)
		if !ok {
			errs = append(errs, &FieldError{File: file, Kind: "scenario", Field: k, Err: unknownWithHint(k, st)})
			continue
		}
		list, ok := scenarioLists[k]
		items, isList := top[k].([]any)
		if !ok || !isList {
			continue
		}
		for i, item := range items {
			obj := objectName(item, list.name, list.namespaced, list.inMeta)
			if obj == "" {
				obj = fmt.Sprintf("%s[%d]", k, i)
			}
			for _, u := range unknownPaths(f.Type.Elem(), item, "") {
				errs = append(errs, &FieldError{File: file, Kind: list.kind, Object: obj, Field: u.path, Err: u.err})
			}
		}
	}
	return errs
}

type unknownKey struct {
	path string
	err  error
}

// unknownPaths returns the paths under v, relative to prefix, of the keys
// type t does not have.
func unknownPaths(t reflect.Type, v any, prefix string) []unknownKey {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []unknownKey
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range sortedKeys(m) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			f, ok := jsonField(t, k)
			if !ok {
				out = append(out, unknownKey{p, unknownWithHint(k, t)})
				continue
			}
			out = append(out, unknownPaths(f.Type, m[k], p)...)
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, item := range items {
			out = append(out, unknownPaths(t.Elem(), item, fmt.Sprintf("%s[%d]", prefix, i))...)
		}
	}
	return out
}

// jsonField finds the field of struct type t whose JSON name is exactly k.
func jsonField(t reflect.Type, k string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if name == k && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// unknownWithHint names the key of t that differs from k only in case, the
// spelling encoding/json would have accepted silently.
func unknownWithHint(k string, t reflect.Type) error {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.EqualFold(name, k) {
			return fmt.Errorf("%w (did you mean %s?)", errUnknownField, name)
		}
	}
	return errUnknownField
}

// objectName reads "namespace/name" (or "name") from a list entry, the way
// State names the object.
func objectName(item any, nameKey string, namespaced, inMeta bool) string {
	m, ok := item.(map[string]any)
	if !ok {
		return ""
	}
	if inMeta {
		if m, ok = m["metadata"].(map[string]any); !ok {
			return ""
		}
	}
	name, _ := m[nameKey].(string)
	if name == "" {
		return ""
	}
	if !namespaced {
		return name
	}
	ns, _ := m["namespace"].(string)
	return Key{Namespace: orDefault(ns, "default"), Name: name}.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
