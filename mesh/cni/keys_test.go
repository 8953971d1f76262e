package cni

import (
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
)

var _ = Describe("configuration keys", func() {
	It("refuses a misspelt key instead of installing the default, and names it", func() {
		_, err := ParseConfig(netConf("1.1.0", nil, map[string]any{"captureMod": "redirect"}), false)
		cniError(err, types.ErrInvalidNetworkConfig, `unknown configuration key "captureMod" (did you mean "captureMode"?)`)

		// Control: the same value under the right key is read.
		c, err := ParseConfig(netConf("1.1.0", nil, map[string]any{"captureMode": "redirect"}), false)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.mode).To(Equal(constants.CaptureRedirect))
	})

	It("names every unknown key, and suggests only near misses", func() {
		_, err := ParseConfig(netConf("1.1.0", nil, map[string]any{"Counters": true, "mtu": 1400}), false)
		cniError(err, types.ErrInvalidNetworkConfig, `unknown configuration key "Counters" (did you mean "counters"?); unknown configuration key "mtu"`)
		Expect(err.Error()).NotTo(ContainSubstring(`"mtu" (did you mean`))
	})

	It("accepts every key the CNI spec and its conventions own", func() {
		conf := netConf("1.1.0", nil, map[string]any{
			"cniVersions":               []string{"1.0.0", "1.1.0"},
			"args":                      map[string]any{"cni": map[string]any{"labels": []any{}}},
			"ipMasq":                    false,
			"ipam":                      map[string]any{},
			"dns":                       map[string]any{"nameservers": []string{"10.96.0.10"}},
			"runtimeConfig":             map[string]any{"portMappings": []any{}},
			"capabilities":              map[string]bool{"portMappings": true},
			"disableCheck":              false,
			"disableGC":                 false,
			"cni.dev/valid-attachments": []any{},
			"cni.dev/attachments":       []any{},
			"excludeNamespaces":         []string{"kube-system"},
			"logLevel":                  "error",
			"counters":                  true,
			"captureMode":               "tproxy",
			"agentSocket":               "/run/aether/cni.sock",
			"requireAgent":              true,
		})
		_, err := ParseConfig(conf, false)
		Expect(err).NotTo(HaveOccurred())
	})

	It("measures edit distance", func() {
		Expect(editDistance("capturemod", "capturemode")).To(Equal(1))
		Expect(editDistance("", "abc")).To(Equal(3))
		Expect(editDistance("kitten", "sitting")).To(Equal(3))
		Expect(suggest("loglevl", pluginKeys)).To(Equal("logLevel"))
		Expect(suggest("zzz", pluginKeys)).To(BeEmpty())
		Expect(suggest("agentSockt", pluginKeys)).To(Equal("agentSocket"))
	})
})
