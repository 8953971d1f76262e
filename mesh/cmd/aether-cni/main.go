// Command aether-cni is the aether chained CNI plugin; its logic lives in
// mesh/cni.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/aether-mesh/aether/mesh/cni"
)

func main() {
	skel.PluginMainFuncs(cni.Funcs(), cni.SupportedVersions, cni.About)
}
