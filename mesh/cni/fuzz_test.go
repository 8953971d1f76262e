package cni

import (
	"errors"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// namesField is how an invalid configuration's error names what is
// wrong: the field or key, quoted.
var namesField = regexp.MustCompile(`(field|key) "[^"]+"`)

// checkCNIError fails unless err is a CNI error a runtime can report: a
// code, a message, and for a configuration the plugin refuses, the field.
func checkCNIError(t *testing.T, what string, err error) {
	t.Helper()
	var ce *types.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %T %v, want a CNI error", what, err, err)
	}
	switch {
	case ce.Code == 0 || ce.Msg == "":
		t.Fatalf("%s: CNI error %+v has no code or no message", what, ce)
	case ce.Code == types.ErrInvalidNetworkConfig && !namesField.MatchString(ce.Msg):
		t.Fatalf("%s: %q names no field of the configuration", what, ce.Msg)
	case ce.Code == types.ErrDecodingFailure && (!strings.Contains(ce.Msg, "network configuration") || ce.Details == ""):
		t.Fatalf("%s: decoding failure %+v does not say what failed to decode and why", what, ce)
	}
}

// Whatever a runtime writes on stdin and in CNI_ARGS, the plugin's
// configuration parsing (strict for ADD, CHECK, GC and STATUS; lenient
// for DEL), its reading of prevResult and its rule build never panic,
// and every refusal is a CNI error naming the field. Nothing here touches
// a namespace or the handoff directory.
func FuzzParseConfig(f *testing.F) {
	v4 := []netip.Prefix{netip.MustParsePrefix("10.244.1.2/24")}
	dual := append(v4, netip.MustParsePrefix("fd00:244:1::2/64"))
	f.Add(netConf("1.1.0", prevResult("/run/netns/p", v4), nil), "K8S_POD_NAMESPACE=demo;K8S_POD_NAME=api-0;K8S_POD_UID=u1")
	f.Add(netConf("1.0.0", prevResult("/run/netns/p", dual), map[string]any{"captureMode": "redirect", "counters": true}), "")
	f.Add(netConf("1.1.0", prevResult("/run/netns/p", dual[1:]), map[string]any{"excludeNamespaces": []string{"kube-system", ""}}), "K8S_POD_NAMESPACE=kube-system")
	f.Add(netConf("1.1.0", prevResult("/run/netns/p", nil), map[string]any{"logLevel": "debug", "requireAgent": true}), "IgnoreUnknown=1;X=y")
	f.Add(netConf("1.1.0", nil, map[string]any{"cni.dev/valid-attachments": []map[string]string{{"containerID": "c", "ifname": "eth0"}}}), "")
	f.Add(netConf("1.1.0", prevResult("/run/netns/p", v4), map[string]any{"captureMod": "redirect", "agentSocket": "cni.sock"}), "K8S_POD_NAMESPACE")
	f.Add([]byte(`{"cniVersion":"1.1.0","name":`), "")
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"n","type":"aether-cni","prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.1"}]}}`), "")
	f.Add([]byte(`{"cniVersion":"0.3.1","name":"n","type":"aether-cni","prevResult":{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.1/8"}]}}`), "")
	f.Fuzz(func(t *testing.T, stdin []byte, cniArgs string) {
		for _, strict := range []bool{true, false} {
			conf, err := parseConfig(stdin, strict, strict)
			if err != nil {
				checkCNIError(t, "parse", err)
				continue
			}
			if _, _, err := conf.excluded(&skel.CmdArgs{Args: cniArgs}); err != nil {
				checkCNIError(t, "CNI_ARGS", err)
			}
			if conf.PrevResult == nil {
				continue
			}
			pod, err := conf.Pod()
			if err != nil {
				checkCNIError(t, "prevResult", err)
				continue
			}
			if _, err := conf.build(pod); err != nil {
				checkCNIError(t, "build", err)
			}
		}
	})
}
