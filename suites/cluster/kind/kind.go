// Package kind runs the suites on a kind cluster: the kind provider of
// suites/cluster. Run is a suite's TestMain on kind, through
// sigs.k8s.io/e2e-framework: Setup creates the cluster (one control plane,
// two workers) with kind's Go API, builds the images offline (rigs/images),
// loads them into every node the way `kind load image-archive` does, and
// installs the mesh (rigs/kind/manifests); Finish exports the cluster's logs
// and only then deletes it. A setup failure runs no test and still runs
// Finish.
package kind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/images"
	"github.com/aether-mesh/aether/rigs/kind/envcheck"
	"github.com/aether-mesh/aether/rigs/kind/manifests"
	"github.com/aether-mesh/aether/rigs/kind/nodeimage"
	"github.com/aether-mesh/aether/rigs/kind/rootfs"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/results"
)

// Environment variables a kind run reads.
const (
	// EnvArtifacts is where a run keeps its kubeconfig, images and the
	// exported logs (default: a new temporary directory).
	EnvArtifacts = "AETHER_KIND_ARTIFACTS"
	// EnvNodeImage overrides kind's default node image.
	EnvNodeImage = "AETHER_KIND_NODE_IMAGE"
	// EnvForceCapture installs every case's mesh in this capture mode,
	// whatever the case asks: the mesh broken on purpose (redirect turns
	// udproute's subjects red, as the same agent does on netns).
	EnvForceCapture = "AETHER_KIND_FORCE_CAPTURE"
)

// Options describe the cluster a suite runs on.
type Options struct {
	// Name is the kind cluster's name.
	Name string
	// Artifacts receives kubeconfig, images/, logs/.
	Artifacts string
	NodeImage string
	// ForceCapture, when set, replaces every case's capture mode.
	ForceCapture constants.CaptureMode
}

// OptionsFromEnv names the cluster after the suite.
func OptionsFromEnv(suite string) (Options, error) {
	o := Options{Name: "aether-e2e-" + suite, Artifacts: os.Getenv(EnvArtifacts), NodeImage: os.Getenv(EnvNodeImage)}
	if f := os.Getenv(EnvForceCapture); f != "" {
		m, err := constants.ParseCaptureMode(f)
		if err != nil {
			return o, fmt.Errorf("%s=%q: %w", EnvForceCapture, f, err)
		}
		o.ForceCapture = m
	}
	if o.Artifacts == "" {
		dir, err := os.MkdirTemp("", "aether-kind-")
		if err != nil {
			return o, fmt.Errorf("failed to create an artifacts dir: %w", err)
		}
		o.Artifacts = dir
	}
	o.Artifacts = filepath.Join(o.Artifacts, suite)
	return o, os.MkdirAll(o.Artifacts, 0o755)
}

// Run is a suite's TestMain on kind. It returns the exit code: non-zero
// when setup failed (no test ran), when a test failed, or when Finish could
// not export the logs or delete the cluster.
func Run(m *testing.M, o Options) int {
	s := &setup{opts: o, provider: kindcluster.NewProvider(kindcluster.ProviderWithLogger(kindcmd.NewLogger()))}
	return run(m, env.New(),
		[]types.EnvFunc{s.create, s.buildImages, s.loadImages, s.installMesh},
		[]types.EnvFunc{s.exportLogs, s.destroy})
}

// run wires setups and finishes into an e2e-framework environment. Finish
// steps' errors are only logged by the framework; they are collected here so
// a cluster left behind fails the run.
func run(m *testing.M, e types.Environment, setups, finishes []types.EnvFunc) int {
	var mu sync.Mutex
	var finishErrs []error
	for _, f := range setups {
		e.Setup(named(f))
	}
	for _, f := range finishes {
		e.Finish(func(ctx context.Context, c *envconf.Config) (context.Context, error) {
			ctx, err := f(ctx, c)
			if err != nil {
				fmt.Fprintf(os.Stderr, "aether kind finish: %v\n", err)
				mu.Lock()
				finishErrs = append(finishErrs, err)
				mu.Unlock()
			}
			return ctx, nil
		})
	}
	code := e.Run(m)
	if code == 0 && len(finishErrs) > 0 {
		code = 1
	}
	return code
}

// named prints a setup step's failure where a person reads it (the
// framework logs it through klog).
func named(f types.EnvFunc) types.EnvFunc {
	return func(ctx context.Context, c *envconf.Config) (context.Context, error) {
		ctx, err := f(ctx, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "aether kind setup: %v; no test runs\n", err)
		}
		return ctx, err
	}
}

// setup is one suite's kind cluster.
type setup struct {
	opts     Options
	provider *kindcluster.Provider
	created  bool
	tarballs []string
	// binaries is the sha256 of each mesh binary baked into the images.
	binaries map[string]string
}

func (s *setup) kubeconfig() string { return filepath.Join(s.opts.Artifacts, "kubeconfig") }

func (s *setup) create(ctx context.Context, c *envconf.Config) (context.Context, error) {
	cfg := &kindv1alpha4.Cluster{
		Nodes: []kindv1alpha4.Node{{Role: kindv1alpha4.ControlPlaneRole}, {Role: kindv1alpha4.WorkerRole}, {Role: kindv1alpha4.WorkerRole}},
		// The scenarios' ClusterIPs are in 10.96.0.0/16. kindnetd cannot
		// be had offline: the pod network is the provider's (podnet.go).
		// No kube-proxy: the mesh captures every service port it serves.
		Networking: kindv1alpha4.Networking{ServiceSubnet: "10.96.0.0/16", DisableDefaultCNI: true, KubeProxyMode: kindv1alpha4.ProxyMode("none")},
		// The node image's control-plane images are under its own
		// repository, and its kubelet runs on a cgroup v1 host.
		KubeadmConfigPatches: []string{nodeimage.KubeadmConfig(), nodeimage.KubeletConfig},
	}
	if err := privilegedWithinEngine(ctx); err != nil {
		return ctx, err
	}
	if err := s.nodeImage(ctx); err != nil {
		return ctx, err
	}
	// Nodes are Ready only once the pod network is in: kind's own wait
	// would time out, so the provider waits after installing it.
	opts := []kindcluster.CreateOption{kindcluster.CreateWithV1Alpha4Config(cfg), kindcluster.CreateWithKubeconfigPath(s.kubeconfig()),
		kindcluster.CreateWithWaitForReady(0), kindcluster.CreateWithDisplayUsage(false), kindcluster.CreateWithDisplaySalutation(false),
		kindcluster.CreateWithNodeImage(s.opts.NodeImage)}
	sweepLeftover(s.provider, s.opts.Name)
	s.created = true // a half-made cluster is deleted too
	start := time.Now()
	if err := s.provider.Create(s.opts.Name, opts...); err != nil {
		return ctx, fmt.Errorf("failed to create kind cluster %s: %w", s.opts.Name, err)
	}
	c.WithKubeconfigFile(s.kubeconfig())
	k, err := s.client()
	if err != nil {
		return ctx, err
	}
	_, all, err := s.workers()
	if err != nil {
		return ctx, err
	}
	if apiServer, err = controlPlaneURL(all); err != nil {
		return ctx, err
	}
	if err := podNetwork(ctx, k.cs, all); err != nil {
		return ctx, err
	}
	if err := waitNodesReady(ctx, k.cs, len(all)); err != nil {
		return ctx, err
	}
	fmt.Fprintf(os.Stderr, "aether kind: cluster %s ready in %s\n", s.opts.Name, time.Since(start).Round(time.Second))
	return ctx, nil
}

// controlPlaneURL is the API server's address on the kind network.
func controlPlaneURL(all map[string]nodes.Node) (string, error) {
	for _, n := range all {
		role, err := n.Role()
		if err != nil || role != "control-plane" {
			continue
		}
		ip, _, err := n.IP()
		if err != nil {
			return "", fmt.Errorf("control plane %s: %w", n.String(), err)
		}
		return "https://" + net.JoinHostPort(ip, "6443"), nil
	}
	return "", errors.New("the kind cluster has no control-plane node")
}

// nodeImage builds the node image unless AETHER_KIND_NODE_IMAGE names one.
func (s *setup) nodeImage(ctx context.Context) error {
	if s.opts.NodeImage != "" {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := node.ModuleRoot(wd)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "aether kind: "+format+"\n", args...) }
	s.opts.NodeImage, err = nodeimage.Build(ctx, nodeimage.Options{Root: root, Cache: nodeimage.DefaultCache(), WorkDir: rootfs.WorkDir(), Say: say})
	return err
}

// sweepLeftover deletes a cluster of this name that an interrupted run
// left behind: its nodes would hold the name and the run would fail.
func sweepLeftover(p *kindcluster.Provider, name string) {
	clusters, err := p.List()
	if err != nil {
		return
	}
	for _, c := range clusters {
		if c == name {
			fmt.Fprintf(os.Stderr, "aether kind: deleting cluster %s left by an earlier run\n", name)
			_ = p.Delete(name, "")
		}
	}
}

// privilegedWithinEngine tells the patched kind (third_party/kind) to give
// nodes what --privileged gives, within the daemon's capabilities, when the
// engine would refuse --privileged itself (make kind-check shows both). A
// value the user set is kept.
func privilegedWithinEngine(ctx context.Context) error {
	if os.Getenv(envcheck.PrivilegedAsEnv) != "" {
		return nil
	}
	server, bnd, err := envcheck.Engine(ctx)
	if err != nil {
		return err
	}
	if envcheck.RefusesPrivileged(server, bnd) {
		fmt.Fprintf(os.Stderr, "aether kind: Docker %s refuses --privileged (its daemon lacks %s); nodes get the daemon's capabilities instead\n",
			server, strings.Join(envcheck.MissingCaps(bnd), ", "))
		return os.Setenv(envcheck.PrivilegedAsEnv, strings.Join(envcheck.PrivilegedAs(envcheck.DockerCaps(bnd)), "\n"))
	}
	return nil
}

func (s *setup) buildImages(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	wd, err := os.Getwd()
	if err != nil {
		return ctx, err
	}
	root, err := node.ModuleRoot(wd)
	if err != nil {
		return ctx, err
	}
	binDir, imgDir := filepath.Join(s.opts.Artifacts, "bin"), filepath.Join(s.opts.Artifacts, "images")
	var names []string
	for _, img := range images.All() {
		names = append(names, img.Binaries...)
	}
	if err := images.BuildBinaries(root, binDir, names...); err != nil {
		return ctx, err
	}
	// Results name the exact mesh binaries they judged (rigs/results):
	// on kind, the ones baked into the images.
	if s.binaries, err = results.HashBinaries(binDir, node.MeshBinaries...); err != nil {
		return ctx, err
	}
	for _, img := range images.All() {
		path, err := images.Build(img, binDir, imgDir)
		if err != nil {
			return ctx, err
		}
		s.tarballs = append(s.tarballs, path)
	}
	return ctx, nil
}

// loadImages imports every tarball into every node's containerd, as kind's
// `load image-archive` does (nodeutils.LoadImageArchive: ctr import).
func (s *setup) loadImages(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	ns, err := s.provider.ListInternalNodes(s.opts.Name)
	if err != nil {
		return ctx, fmt.Errorf("failed to list the nodes of %s: %w", s.opts.Name, err)
	}
	for _, n := range ns {
		for _, path := range s.tarballs {
			if err := loadArchive(n, path); err != nil {
				return ctx, err
			}
		}
	}
	return ctx, nil
}

func loadArchive(n nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open image %q: %w", path, err)
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(n, f); err != nil {
		return fmt.Errorf("failed to load %s into node %s: %w", filepath.Base(path), n.String(), err)
	}
	return nil
}

func (s *setup) installMesh(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	k, err := s.client()
	if err != nil {
		return ctx, err
	}
	workers, all, err := s.workers()
	if err != nil {
		return ctx, err
	}
	if err := k.installMesh(ctx, values(manifests.Defaults().Mode)); err != nil {
		return ctx, err
	}
	current = &Provider{k: k, workers: workers, nodes: all, binaries: s.binaries, forceCapture: s.opts.ForceCapture}
	if m := s.opts.ForceCapture; m != "" {
		fmt.Fprintf(os.Stderr, "aether kind: %s=%s: every case's mesh is installed in %s capture, whatever it asks\n", EnvForceCapture, m, m)
	}
	return ctx, nil
}

// workers are the cluster's worker nodes by name, in order: scenario nodes
// map onto them in scenario order. all is every node by name.
func (s *setup) workers() (workers []string, all map[string]nodes.Node, err error) {
	ns, err := s.provider.ListNodes(s.opts.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list the nodes of %s: %w", s.opts.Name, err)
	}
	all = map[string]nodes.Node{}
	for _, n := range ns {
		role, err := n.Role()
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", n.String(), err)
		}
		all[n.String()] = n
		if role == "worker" {
			workers = append(workers, n.String())
		}
	}
	sort.Strings(workers)
	if len(workers) == 0 {
		return nil, nil, fmt.Errorf("kind cluster %s has no worker nodes", s.opts.Name)
	}
	return workers, all, nil
}

func (s *setup) client() (*kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %q: %w", s.kubeconfig(), err)
	}
	return newKube(cfg)
}

// exportLogs runs before destroy: the logs of a failed run are its
// evidence, and they go with the cluster.
func (s *setup) exportLogs(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if !s.created {
		return ctx, nil
	}
	dir := filepath.Join(s.opts.Artifacts, "logs")
	if err := s.provider.CollectLogs(s.opts.Name, dir); err != nil {
		return ctx, fmt.Errorf("failed to export the logs of kind cluster %s to %s: %w", s.opts.Name, dir, err)
	}
	fmt.Fprintf(os.Stderr, "aether kind: logs of %s in %s\n", s.opts.Name, dir)
	return ctx, nil
}

func (s *setup) destroy(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	current = nil
	if !s.created {
		return ctx, nil
	}
	if err := s.provider.Delete(s.opts.Name, s.kubeconfig()); err != nil {
		return ctx, fmt.Errorf("failed to delete kind cluster %s: %w", s.opts.Name, err)
	}
	return ctx, nil
}

// current is the provider Setup made for this test binary's suite.
var current *Provider

// Current returns the provider of the kind cluster Run set up.
func Current() (*Provider, error) {
	if current == nil {
		return nil, errors.New("no kind cluster was set up in this test binary: kind runs go through the suite's TestMain (make e2e)")
	}
	return current, nil
}

// apiServer is the control plane's URL on the kind network: the cluster
// has no DNS and no kube-proxy, so the agents cannot reach the kubernetes
// Service by name (set by create; empty keeps the manifests' default).
var apiServer string

func values(mode constants.CaptureMode) manifests.Values {
	v := manifests.Defaults()
	v.Mode = mode
	if apiServer != "" {
		v.APIServer = apiServer
	}
	v.CNIImage, v.AgentImage, v.TestAppImage = images.CNI.Ref, images.Agent.Ref, images.TestApp.Ref
	return v
}
