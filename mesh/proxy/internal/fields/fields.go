// Package fields refuses configuration the data plane does not implement.
// Envoy rejects what it cannot honour instead of silently ignoring it; a
// field set outside the implemented subset is therefore a NACK, named by its
// path so the control plane's author can find it.
package fields

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Only returns an error naming the first field set on msg that is not in
// allowed (proto field names). path is msg's location in its resource.
func Only(msg proto.Message, path string, allowed ...string) error {
	var bad []string
	msg.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !slices.Contains(allowed, string(fd.Name())) {
			bad = append(bad, string(fd.Name()))
		}
		return true
	})
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%s.%s: field is set but not supported by this data plane (supported: %v)", path, bad[0], allowed)
}
