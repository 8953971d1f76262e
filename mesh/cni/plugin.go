package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/handoff"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("1.0.0", "1.1.0")

// About is the plugin's one-line description (printed when run bare).
const About = "aether-cni: chained CNI plugin installing aether's capture rules (mark-and-divert, proposal 038) in the pod netns"

// ErrCaptureDrift is the plugin-specific CNI error code (100+ are the
// plugin's own) CHECK answers when the namespace does not hold the built
// rule set.
const ErrCaptureDrift uint = 100

// Config is the plugin's network configuration.
type Config struct {
	types.NetConf
	// CaptureMode is "tproxy" (default) or "redirect".
	CaptureMode string `json:"captureMode,omitempty"`
	// ExcludeNamespaces lists Kubernetes namespaces whose pods get no
	// capture rules; the pod's namespace comes from CNI_ARGS
	// K8S_POD_NAMESPACE.
	ExcludeNamespaces []string `json:"excludeNamespaces,omitempty"`
	// LogLevel is debug, info, warn (default) or error; logs go to stderr.
	LogLevel string `json:"logLevel,omitempty"`
	// Counters adds a counter to every capture rule.
	Counters bool `json:"counters,omitempty"`
	// AgentSocket is the node agent's handoff socket (default
	// handoff.DefaultSocket). ADD records the pod in the directory beside
	// it and tells the agent; DEL removes the record and tells the agent.
	AgentSocket string `json:"agentSocket,omitempty"`
	// RequireAgent makes ADD fail, and take its rules out again, when the
	// pod cannot be handed over. By default a pod whose agent is away
	// starts with its rules, and the agent learns of it from its record
	// when it comes back.
	RequireAgent bool `json:"requireAgent,omitempty"`

	mode constants.CaptureMode
	log  *slog.Logger
}

// k8sArgs are the CNI_ARGS a Kubernetes runtime passes (containerd and
// CRI-O both set K8S_POD_UID).
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE types.UnmarshallableString //nolint:revive // the CNI_ARGS key
	K8S_POD_NAME      types.UnmarshallableString //nolint:revive // the CNI_ARGS key
	K8S_POD_UID       types.UnmarshallableString //nolint:revive // the CNI_ARGS key
}

func invalidField(field, format string, a ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("invalid network configuration field %q: %s", field, fmt.Sprintf(format, a...)), "")
}

// ParseConfig decodes and validates stdin. needPrev says whether the
// command requires prevResult (ADD and CHECK do).
func ParseConfig(stdin []byte, needPrev bool) (*Config, error) {
	return parseConfig(stdin, needPrev, true)
}

// parseConfig is ParseConfig; strictKeys false only logs unknown keys. DEL
// parses that way: it may carry a configuration cached by an older plugin
// that accepted other keys, and refusing it would leave the pod impossible
// to tear down, while Remove needs none of them.
func parseConfig(stdin []byte, needPrev, strictKeys bool) (*Config, error) {
	conf := &Config{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "failed to parse network configuration", err.Error())
	}
	keysErr := checkKeys(stdin)
	if keysErr != nil && strictKeys {
		return nil, keysErr
	}
	mode, err := ParseMode(conf.CaptureMode)
	if err != nil {
		return nil, invalidField("captureMode", "%v", err)
	}
	conf.mode = mode
	level := slog.LevelWarn
	switch conf.LogLevel {
	case "", "warn":
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error":
		level = slog.LevelError
	default:
		return nil, invalidField("logLevel", "unknown level %q: want debug, info, warn or error", conf.LogLevel)
	}
	conf.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("plugin", "aether-cni")
	if keysErr != nil {
		conf.log.Warn("ignoring configuration keys the plugin does not know", "error", keysErr)
	}
	if conf.AgentSocket == "" {
		conf.AgentSocket = handoff.DefaultSocket
	}
	if err := checkSocketPath(conf.AgentSocket); err != nil {
		return nil, invalidField("agentSocket", "%v", err)
	}
	for i, ns := range conf.ExcludeNamespaces {
		if ns == "" {
			return nil, invalidField(fmt.Sprintf("excludeNamespaces[%d]", i), "empty namespace name")
		}
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.NetConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, `failed to parse network configuration field "prevResult"`, err.Error())
		}
	}
	if needPrev && conf.PrevResult == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `missing network configuration field "prevResult": aether-cni is a chained plugin and must follow an interface plugin such as ptp`, "")
	}
	return conf, nil
}

// Pod extracts the pod's addresses from prevResult.
func (c *Config) Pod() (Pod, error) {
	res, err := current.NewResultFromResult(c.PrevResult)
	if err != nil {
		return Pod{}, types.NewError(types.ErrDecodingFailure, `failed to convert network configuration field "prevResult"`, err.Error())
	}
	var pod Pod
	for i, ip := range res.IPs {
		a, ok := netip.AddrFromSlice(ip.Address.IP)
		if !ok {
			return Pod{}, invalidField(fmt.Sprintf("prevResult.ips[%d].address", i), "not an IP address: %v", ip.Address.IP)
		}
		ones, _ := ip.Address.Mask.Size()
		pod.Addrs = append(pod.Addrs, netip.PrefixFrom(a.Unmap(), ones))
	}
	if len(pod.Families()) == 0 {
		return Pod{}, invalidField("prevResult.ips", "the previous plugin assigned the pod no IPv4 or IPv6 address")
	}
	return pod, nil
}

// checkSocketPath refuses a path a unix socket cannot have: relative, or
// longer than sun_path holds.
func checkSocketPath(path string) error {
	switch {
	case !filepath.IsAbs(path):
		return fmt.Errorf("%q is not an absolute path", path)
	case len(path) > maxSocketPath:
		return fmt.Errorf("%q is %d bytes, a unix socket path holds at most %d", path, len(path), maxSocketPath)
	}
	return nil
}

// maxSocketPath is sun_path's size less its terminating NUL.
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

func podArgs(args *skel.CmdArgs) (k8sArgs, error) {
	var ka k8sArgs
	ka.IgnoreUnknown = true
	if err := types.LoadArgs(args.Args, &ka); err != nil {
		return k8sArgs{}, types.NewError(types.ErrInvalidEnvironmentVariables, "failed to parse CNI_ARGS", err.Error())
	}
	return ka, nil
}

func (c *Config) excluded(args *skel.CmdArgs) (string, bool, error) {
	ka, err := podArgs(args)
	if err != nil {
		return "", false, err
	}
	ns := string(ka.K8S_POD_NAMESPACE)
	return ns, ns != "" && slices.Contains(c.ExcludeNamespaces, ns), nil
}

// netnsError turns an installer error into a CNI error with a code: a path
// that is missing or not a namespace is the caller's input, anything else
// is the plugin's failure.
func netnsError(path string, err error) error {
	if errors.Is(err, ErrNetnsMissing) || errors.Is(err, ErrNotNetns) {
		return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("invalid CNI_NETNS %q", path), err.Error())
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

func (c *Config) build(pod Pod) (RuleSet, error) {
	rs, err := Build(c.mode, pod, Options{Counters: c.Counters})
	if err != nil {
		return RuleSet{}, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return rs, nil
}

// Add installs the capture rule set in the pod netns and passes prevResult
// through unchanged.
func Add(args *skel.CmdArgs) error {
	res, err := add(args, nil)
	if err != nil {
		return err
	}
	return types.PrintResult(res.result, res.version)
}

type addResult struct {
	result  types.Result
	version string
}

func add(args *skel.CmdArgs, stats *Stats) (addResult, error) {
	conf, err := ParseConfig(args.StdinData, true)
	if err != nil {
		return addResult{}, err
	}
	out := addResult{result: conf.PrevResult, version: conf.CNIVersion}
	ns, skip, err := conf.excluded(args)
	if err != nil {
		return addResult{}, err
	}
	if skip {
		conf.log.Info("namespace excluded, no capture", "namespace", ns, "container", args.ContainerID)
		return out, nil
	}
	pod, err := conf.Pod()
	if err != nil {
		return addResult{}, err
	}
	rs, err := conf.build(pod)
	if err != nil {
		return addResult{}, err
	}
	if args.Netns == "" {
		return addResult{}, types.NewError(types.ErrInvalidNetNS, "missing CNI_NETNS", "")
	}
	in := &Installer{NetnsPath: args.Netns, Stats: stats}
	if err := in.Install(rs); err != nil {
		return addResult{}, netnsError(args.Netns, err)
	}
	conf.log.Info("capture installed", "mode", conf.mode, "netns", args.Netns, "container", args.ContainerID)
	// The agent hears of the pod only once its rules are in: a listener
	// bound into a pod whose capture is missing would never see traffic.
	if herr := conf.handOver(args, pod); herr != nil {
		if err := conf.handOverFailed(args, in, herr); err != nil {
			return addResult{}, err
		}
	}
	return out, nil
}

// Del removes what ADD installed and tells the agent the pod is gone. A
// missing netns, rules already gone, or an agent that is away is not an
// error: DEL may be called any number of times.
func Del(args *skel.CmdArgs) error { return del(args, nil) }

func del(args *skel.CmdArgs, stats *Stats) error {
	conf, err := parseConfig(args.StdinData, false, false)
	if err != nil {
		return err
	}
	// First, whatever the netns and the namespace: a pod whose netns is
	// already gone, or whose namespace was excluded after its ADD, must
	// still leave the agent. A record left behind is not worth a failed
	// DEL: a restarted agent drops it, its netns being gone.
	if err := conf.forget(args); err != nil {
		conf.log.Error("failed to forget the pod's handoff record", "container", args.ContainerID, "err", err)
	}
	if _, skip, err := conf.excluded(args); err != nil || skip {
		return err
	}
	if args.Netns == "" {
		return nil
	}
	in := &Installer{NetnsPath: args.Netns, Stats: stats}
	if err := in.Remove(); err != nil {
		if errors.Is(err, ErrNetnsMissing) {
			return nil
		}
		return netnsError(args.Netns, err)
	}
	conf.log.Info("capture removed", "netns", args.Netns, "container", args.ContainerID)
	return nil
}

// Check lists the namespace's state back and fails, naming the difference,
// unless it is exactly the rule set ADD would build.
func Check(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData, true)
	if err != nil {
		return err
	}
	want := RuleSet{}
	_, skip, err := conf.excluded(args)
	if err != nil {
		return err
	}
	if !skip {
		pod, err := conf.Pod()
		if err != nil {
			return err
		}
		if want, err = conf.build(pod); err != nil {
			return err
		}
	}
	in := &Installer{NetnsPath: args.Netns}
	d, err := in.Verify(want)
	if err != nil {
		return netnsError(args.Netns, err)
	}
	if !d.None() {
		return types.NewError(ErrCaptureDrift, fmt.Sprintf("aether capture state in netns %q drifted from the built rule set: %s", args.Netns, d), d.Diff)
	}
	return nil
}

// GC answers the spec 1.1.0 garbage collection: remove what the plugin owns
// for attachments missing from cni.dev/valid-attachments. The capture rules
// live inside the pod netns and go with it (GC carries no CNI_NETNS, and
// the plugin leaves them alone); the handoff records of this network's
// missing attachments are removed and the agent told. GC refuses a
// configuration ADD would refuse, and a malformed attachment list.
func GC(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData, false)
	if err != nil {
		return err
	}
	for i, a := range conf.ValidAttachments {
		switch {
		case a.ContainerID == "":
			return invalidField(fmt.Sprintf("cni.dev/valid-attachments[%d].containerID", i), "empty container ID")
		case a.IfName == "":
			return invalidField(fmt.Sprintf("cni.dev/valid-attachments[%d].ifname", i), "empty interface name")
		}
	}
	if !hasKey(args.StdinData, "cni.dev/valid-attachments") {
		// Not a runtime's GC (libcni always sends the key, null for
		// none): without the list, every record would look stale.
		conf.log.Info("GC without cni.dev/valid-attachments: no handoff record collected")
		return nil
	}
	if err := conf.collect(conf.ValidAttachments); err != nil {
		return types.NewError(types.ErrInternal, "GC: failed to forget the handoff records of missing attachments", err.Error())
	}
	return nil
}

// Funcs wires the plugin's commands for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: Add, Del: Del, Check: Check, GC: GC, Status: Status}
}

// Status answers whether the plugin can serve ADD: its configuration is
// valid and nf_tables answers a (read-only) list.
func Status(args *skel.CmdArgs) error {
	if _, err := ParseConfig(args.StdinData, false); err != nil {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "nftables is not available", err.Error())
	}
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "nftables is not available", err.Error())
	}
	return nil
}
