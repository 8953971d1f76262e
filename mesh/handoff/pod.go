// Package handoff is how a pod reaches the node agent: the CNI plugin, at
// ADD, records the pod (namespace, name, UID, netns path, IPs) and tells the
// agent over a unix socket; at DEL it removes the record and tells the agent
// the pod is gone. The agent binds capture listeners only for pods handed
// over this way, so nothing depends on an annotation someone else must write.
//
// The record is what makes the handoff survive an agent restart and an ADD
// made while the agent was away: the plugin writes one file per attachment
// into the directory beside the socket (StateDir) before it calls the agent,
// and the agent reads that directory when it starts, keeping only the
// records whose netns is still the one the plugin saw. Each file is written
// to a temporary name and renamed into place, so a reader never sees half a
// record and no lock is needed: the runtime never runs two commands for one
// attachment at once, and different attachments own different files. The
// directory lives under /run, a tmpfs, so it goes with a reboot exactly as
// the namespaces it names do.
package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultSocket is where the node agent listens for the plugin.
const DefaultSocket = "/run/aether/cni.sock"

// StateDir is the directory of records that belongs to the agent on socket:
// a directory holds one agent's handoff.
func StateDir(socket string) Dir { return Dir(filepath.Join(filepath.Dir(socket), "pods")) }

// Ref names one attachment of a pod, the way the runtime names it to the
// plugin on ADD, DEL and GC: CNI_CONTAINERID and CNI_IFNAME.
type Ref struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

func (r Ref) String() string { return r.ContainerID + "/" + r.IfName }

// Pod is one pod handed over: the attachment, the pod's identity from the
// runtime's CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID), its
// netns path (CNI_NETNS) and the IPs the interface plugin gave it.
type Pod struct {
	Ref
	// Network is the CNI network name; GC of one network leaves the
	// records of another alone.
	Network   string `json:"network,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is empty when the runtime passed no K8S_POD_UID.
	UID   string       `json:"uid,omitempty"`
	Netns string       `json:"netns"`
	IPs   []netip.Addr `json:"ips"`
	// NetnsInode is the namespace's inode when the plugin saw it (0 when
	// unknown). A path under /proc can come to name another namespace once
	// its process is gone; the inode tells a restarted agent whether the
	// path still names this pod's.
	NetnsInode uint64 `json:"netnsInode,omitempty"`
}

// containerIDChars is the CNI spec's character set for a container ID. It
// also makes the ID safe as part of a file name.
var containerIDChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)

// Validate answers an error naming the first bad field.
func (r Ref) Validate() error {
	if !containerIDChars.MatchString(r.ContainerID) {
		return fmt.Errorf("field containerID: %q is not a container ID (letters, digits, '_', '.', '-', starting with a letter or digit)", r.ContainerID)
	}
	// Linux interface names: at most 15 bytes, no '/', ':' or whitespace.
	if r.IfName == "" || len(r.IfName) > 15 || strings.ContainsAny(r.IfName, "/: \t\n") || r.IfName == "." || r.IfName == ".." {
		return fmt.Errorf("field ifname: %q is not an interface name", r.IfName)
	}
	return nil
}

// Validate answers an error naming the first bad field.
func (p *Pod) Validate() error {
	if err := p.Ref.Validate(); err != nil {
		return err
	}
	switch {
	case p.Namespace == "":
		return fmt.Errorf("field namespace: empty")
	case p.Name == "":
		return fmt.Errorf("field name: empty")
	case !filepath.IsAbs(p.Netns):
		return fmt.Errorf("field netns: %q is not an absolute path", p.Netns)
	case len(p.IPs) == 0:
		return fmt.Errorf("field ips: empty")
	}
	for i, ip := range p.IPs {
		if !ip.IsValid() {
			return fmt.Errorf("field ips[%d]: not an IP address", i)
		}
	}
	return nil
}

// DecodePod reads one pod strictly: an unknown field is an error, and so is
// a bad field, named.
func DecodePod(r io.Reader) (Pod, error) {
	// The IPs are decoded as strings first: netip.Addr's own decoding
	// error names the value but not the field.
	var w struct {
		Pod
		IPs []string `json:"ips"`
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Pod{}, decodeError(err)
	}
	// One pod per body: anything after it is not silently dropped.
	if _, err := dec.Token(); err != io.EOF {
		return Pod{}, fmt.Errorf("trailing data after the pod at byte %d", dec.InputOffset())
	}
	p := w.Pod
	for i, s := range w.IPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Pod{}, fmt.Errorf("field ips[%d]: %w", i, err)
		}
		p.IPs = append(p.IPs, ip)
	}
	return p, p.Validate()
}

// decodeError names what encoding/json's errors leave vague: the field
// of a wrongly typed or unknown value, and where a body stops being JSON.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("request body is empty: want one pod as a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("truncated JSON: %w", err)
	case errors.As(err, &syn):
		return fmt.Errorf("not JSON at byte %d: %w", syn.Offset, err)
	case errors.As(err, &typ) && typ.Field != "":
		// The wire form embeds Pod, whose Go name prefixes its fields.
		return fmt.Errorf("field %s: a JSON %s, want %s", strings.TrimPrefix(typ.Field, "Pod."), typ.Value, typ.Type)
	case errors.As(err, &typ):
		return fmt.Errorf("request body is a JSON %s, want one pod as a JSON object", typ.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("field %s: not a field of a pod", f)
	}
	return fmt.Errorf("request body unreadable: %w", err)
}

func (p *Pod) String() string {
	return fmt.Sprintf("%s/%s (%s, netns %s)", p.Namespace, p.Name, p.Ref, p.Netns)
}
