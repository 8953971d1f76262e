// Command aether-cni is the aether chained CNI plugin; its logic lives in
// mesh/cni.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/aether-mesh/aether/mesh/cni"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cni.Add,
		Del:    cni.Del,
		Check:  cni.Check,
		Status: cni.Status,
	}, cni.SupportedVersions, cni.About)
}
