package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/mesh/registry"
)

func testValues() Values {
	v := Defaults()
	v.CNIImage, v.AgentImage, v.TestAppImage = "aether-mesh.io/cni:e2e", "aether-mesh.io/agent:e2e", "aether-mesh.io/testapp:e2e"
	return v
}

func decodeMesh(t *testing.T, v Values) map[string]runtime.Object {
	t.Helper()
	b, err := Mesh(v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]runtime.Object{}
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		name := ""
		switch x := o.(type) {
		case interface{ GetName() string }:
			name = x.GetName()
		}
		key := kind + "/" + name
		if _, dup := byName[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		byName[key] = o
	}
	return byName
}

func TestMeshRendersEveryObjectAndDecodesStrictly(t *testing.T) {
	objs := decodeMesh(t, testValues())
	var got []string
	for k := range objs {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"ClusterRole/aether-agent", "ClusterRoleBinding/aether-agent", "ConfigMap/aether-agent-kubeconfig",
		"CustomResourceDefinition/udproutes.gateway.networking.k8s.io", "DaemonSet/aether-cni", "DaemonSet/aether-node",
		"Namespace/aether-system", "ServiceAccount/aether-agent"}
	if !slices.Equal(got, want) {
		t.Fatalf("objects:\n %v\nwant\n %v", got, want)
	}
}

func container(t *testing.T, ps corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range ps.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// mount returns the host path behind a container's mount at path.
func mount(t *testing.T, ps corev1.PodSpec, c corev1.Container, path string) (string, corev1.VolumeMount) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path, m
			}
		}
		t.Fatalf("container %s: the mount at %s is not a hostPath", c.Name, path)
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return "", corev1.VolumeMount{}
}

// The agent + proxy DaemonSet carries what the data path needs: the node's
// netns (hostNetwork), setns and IP_TRANSPARENT (SYS_ADMIN, NET_ADMIN), the
// runtime's netns mounts with HostToContainer propagation so later pods
// appear, and one socket dir on the node for xDS and the CNI's handoff.
func TestAgentDaemonSetCarriesTheMeshsPrivilegesAndMounts(t *testing.T) {
	v := testValues()
	ds := decodeMesh(t, v)["DaemonSet/aether-node"].(*appsv1.DaemonSet)
	ps := ds.Spec.Template.Spec
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet || ps.ServiceAccountName != "aether-agent" {
		t.Fatalf("hostNetwork %v, dnsPolicy %q, serviceAccount %q", ps.HostNetwork, ps.DNSPolicy, ps.ServiceAccountName)
	}
	proxy, agent := container(t, ps, "proxy"), container(t, ps, "agent")
	if proxy.SecurityContext == nil || proxy.SecurityContext.Capabilities == nil {
		t.Fatal("the proxy has no capabilities")
	}
	caps := proxy.SecurityContext.Capabilities.Add
	for _, c := range []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"} {
		if !slices.Contains(caps, c) {
			t.Errorf("proxy capabilities %v lack %s", caps, c)
		}
	}
	for _, c := range []corev1.Container{agent, proxy} {
		for _, at := range []string{"/run/netns", "/var/run/netns"} {
			host, m := mount(t, ps, c, at)
			if host != "/run/netns" || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("%s: %s from host %q, propagation %v; want the host's /run/netns, HostToContainer", c.Name, at, host, m.MountPropagation)
			}
		}
		if host, _ := mount(t, ps, c, v.SocketDir); host != v.SocketDir {
			t.Errorf("%s: %s from host %q", c.Name, v.SocketDir, host)
		}
		if c.Image != v.AgentImage || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: image %q pull %q; want %q, Never", c.Name, c.Image, c.ImagePullPolicy, v.AgentImage)
		}
	}
	sock := "unix://" + v.SocketDir + "/agent.sock"
	// The agent serves the handoff where the CNI (with its default
	// agentSocket) hands pods over.
	handoffArg := "--handoff-socket=" + handoff.DefaultSocket
	for _, want := range []string{"--listen=" + sock, "--capture-mode=tproxy", "--node=$(NODE_NAME)", "--kubeconfig=/etc/aether/kubeconfig", handoffArg} {
		if !slices.Contains(agent.Args, want) {
			t.Errorf("agent args %q lack %q", agent.Args, want)
		}
	}
	if !slices.Contains(proxy.Args, "--xds="+sock) {
		t.Errorf("proxy args %q do not dial the agent's socket %s", proxy.Args, sock)
	}
	for _, c := range []corev1.Container{agent, proxy} {
		if len(c.Env) == 0 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("%s: NODE_NAME does not come from spec.nodeName: %+v", c.Name, c.Env)
		}
	}
}

func TestCNIDaemonSetMountsTheNodesCNIDirs(t *testing.T) {
	v := testValues()
	v.Mode = constants.CaptureRedirect
	objs := decodeMesh(t, v)
	ps := objs["DaemonSet/aether-cni"].(*appsv1.DaemonSet).Spec.Template.Spec
	c := container(t, ps, "install")
	for host, inside := range map[string]string{v.CNIBinDir: "/host" + v.CNIBinDir, v.CNIConfDir: "/host" + v.CNIConfDir} {
		if got, _ := mount(t, ps, c, inside); got != host {
			t.Errorf("%s comes from host %q, want %q", inside, got, host)
		}
	}
	for _, want := range []string{"--capture-mode=redirect", "--cni-bin-dir=/host" + v.CNIBinDir, "--cni-conf-dir=/host" + v.CNIConfDir,
		"--exclude-namespaces=kube-system,aether-system,local-path-storage"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("installer args %q lack %q", c.Args, want)
		}
	}
	// Ready means installed in this very configuration: the probe is the
	// installer's --check with the installer's own flags.
	if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil {
		t.Fatal("the installer has no exec readiness probe")
	}
	if want := append([]string{"/usr/local/bin/aether-cni-install", "--check"}, c.Args...); !slices.Equal(c.ReadinessProbe.Exec.Command, want) {
		t.Errorf("readiness probe %q, want %q", c.ReadinessProbe.Exec.Command, want)
	}
	// The mode reaches the agent too: CNI and agent must agree.
	agent := container(t, objs["DaemonSet/aether-node"].(*appsv1.DaemonSet).Spec.Template.Spec, "agent")
	if !slices.Contains(agent.Args, "--capture-mode=redirect") {
		t.Errorf("agent args %q: the mode did not reach the agent", agent.Args)
	}
	if len(ps.Tolerations) != 1 || ps.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations %+v: the installer must run on every node", ps.Tolerations)
	}
}

// The agent's registry source (mesh/registry/kube) starts informers for
// nodes, pods, services, endpointslices, serviceaccounts and v1alpha2
// udproutes; the role grants list and watch on exactly those, and no write.
func TestRBACGrantsTheAgentsInformersAndNoWrite(t *testing.T) {
	v := testValues()
	objs := decodeMesh(t, v)
	role := objs["ClusterRole/aether-agent"].(*rbacv1.ClusterRole)
	granted := map[string]bool{}
	for _, r := range role.Rules {
		for _, verb := range r.Verbs {
			if verb != "get" && verb != "list" && verb != "watch" {
				t.Errorf("rule %+v grants %q", r, verb)
			}
		}
		if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
			t.Errorf("rule %+v cannot back an informer", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[g+"/"+res] = true
			}
		}
	}
	want := []string{"/nodes", "/pods", "/services", "/serviceaccounts", "discovery.k8s.io/endpointslices", "gateway.networking.k8s.io/udproutes"}
	var got []string
	for k := range granted {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
	crb := objs["ClusterRoleBinding/aether-agent"].(*rbacv1.ClusterRoleBinding)
	if crb.RoleRef.Name != role.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "aether-agent" || crb.Subjects[0].Namespace != v.Namespace {
		t.Fatalf("binding %+v does not bind the role to %s/aether-agent", crb, v.Namespace)
	}
	cm := objs["ConfigMap/aether-agent-kubeconfig"].(*corev1.ConfigMap)
	kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		t.Fatalf("the agent's kubeconfig does not load: %v", err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.AuthInfos[ctx.AuthInfo].TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Fatalf("the agent's kubeconfig does not use its service account token: %+v", kc)
	}
}

// The CRD is the gateway-api module's own file at the version go.mod pins,
// and serves v1alpha2, the version mesh/registry/kube watches.
func TestUDPRouteCRDIsTheModulesOwn(t *testing.T) {
	crd := decodeMesh(t, testValues())["CustomResourceDefinition/udproutes.gateway.networking.k8s.io"].(*apiextensionsv1.CustomResourceDefinition)
	served := false
	for _, v := range crd.Spec.Versions {
		served = served || (v.Name == gwv1alpha2.GroupVersion.Version && v.Served)
	}
	if crd.Spec.Group != gwv1alpha2.GroupName || crd.Spec.Names.Kind != "UDPRoute" || !served {
		t.Fatalf("CRD %s: group %s kind %s, v1alpha2 served %v", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, served)
	}
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/gateway-api: %v", err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	const file = "gateway.networking.k8s.io_udproutes.yaml"
	want, err := os.ReadFile(filepath.Join(mod.Dir, "config", "crd", "experimental", file))
	if err != nil {
		t.Fatal(err)
	}
	got, err := files.ReadFile("crds/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("crds/%s differs from gateway-api %s's; copy it again from %s", file, mod.Version, mod.Dir)
	}
}

func scenario(t *testing.T) registry.Scenario {
	t.Helper()
	b, err := os.ReadFile("../../../fixtures/scenarios/udproute.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sc registry.Scenario
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestWorkloadsDecodeStrictlyAndKeepTheScenariosAddresses(t *testing.T) {
	sc := scenario(t)
	b, err := Workloads(testValues(), sc, map[string]string{"node-a": "aether-e2e-worker"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	pods, svcs, routes := map[string]*corev1.Pod{}, map[string]*corev1.Service{}, map[string]*gwv1alpha2.UDPRoute{}
	var namespaces []string
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Pod:
			pods[x.Name] = x
		case *corev1.Service:
			svcs[x.Name] = x
		case *gwv1alpha2.UDPRoute:
			routes[x.Name] = x
		case *corev1.Namespace:
			namespaces = append(namespaces, x.Name)
		default:
			t.Fatalf("unexpected %T", o)
		}
	}
	if !slices.Equal(namespaces, []string{"demo"}) {
		t.Errorf("namespaces %v, want [demo]", namespaces)
	}
	if len(pods) != len(sc.Pods) || len(svcs) != len(sc.Services) || len(routes) != len(sc.UDPRoutes) {
		t.Fatalf("%d pods, %d services, %d routes; the scenario has %d, %d, %d", len(pods), len(svcs), len(routes), len(sc.Pods), len(sc.Services), len(sc.UDPRoutes))
	}
	for _, sp := range sc.Pods {
		p := pods[sp.Name]
		c := p.Spec.Containers[0]
		if p.Spec.NodeName != "aether-e2e-worker" || p.Namespace != "demo" || p.Labels["app"] != sp.Labels["app"] {
			t.Errorf("pod %s: node %q ns %q labels %v", sp.Name, p.Spec.NodeName, p.Namespace, p.Labels)
		}
		want := []string{"--name", sp.Name, "--record", "/dev/stdout", "--udp", "7000", "--tcp", "7100"}
		if !slices.Equal(c.Args, want) || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("pod %s: args %q pull %q; want %q, Never", sp.Name, c.Args, c.ImagePullPolicy, want)
		}
	}
	for _, ss := range sc.Services {
		s := svcs[ss.Name]
		if s.Spec.ClusterIP != ss.ClusterIP || !equalMaps(s.Spec.Selector, ss.Selector) || len(s.Spec.Ports) != len(ss.Ports) {
			t.Errorf("service %s: %+v, scenario %+v", ss.Name, s.Spec, ss)
		}
	}
	w := routes["svc-w"]
	if len(w.Spec.Rules) != 1 || len(w.Spec.Rules[0].BackendRefs) != 2 || *w.Spec.Rules[0].BackendRefs[1].Weight != 1 {
		t.Errorf("UDPRoute svc-w: %+v", w.Spec)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestWorkloadsRefuseWhatTheyCannotPlace(t *testing.T) {
	sc := scenario(t)
	if _, err := Workloads(testValues(), sc, map[string]string{"node-b": "w"}); err == nil || !strings.Contains(err.Error(), `"node-a" maps to no cluster node`) {
		t.Errorf("an unmapped node: %v", err)
	}
	sc.Endpoints = []registry.ScenarioEndpoints{{Service: "svc-a"}}
	if _, err := Workloads(testValues(), sc, map[string]string{"node-a": "w"}); err == nil || !strings.Contains(err.Error(), "endpoints") {
		t.Errorf("explicit endpoints: %v", err)
	}
	v := testValues()
	v.AgentImage = ""
	if _, err := Mesh(v); err == nil || !strings.Contains(err.Error(), "AgentImage") {
		t.Errorf("no agent image: %v", err)
	}
	v = testValues()
	v.Mode = "ebpf"
	if _, err := Mesh(v); err == nil || !strings.Contains(err.Error(), "Mode") {
		t.Errorf("an unknown mode: %v", err)
	}
}

// A misspelled field in a template is caught when the rendered object is
// decoded, naming the field; the same template spelled right decodes.
func TestUnknownFieldInATemplateIsAnError(t *testing.T) {
	const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: x, namespace: {{ .Namespace }}}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      FIELD: true
      containers: [{name: c, image: {{ .AgentImage }}}]
`
	render := func(field string) []byte {
		fsys := fstest.MapFS{"t/ds.yaml.tmpl": {Data: []byte(strings.Replace(ds, "FIELD", field, 1))}}
		var out bytes.Buffer
		if err := execute(&out, fsys, "t/*.yaml.tmpl", testValues()); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	if _, err := Decode(render("hostNetwork")); err != nil {
		t.Fatalf("the well-spelled template: %v", err)
	}
	_, err := Decode(render("hostNetwrok"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.template.spec.hostNetwrok"`) || !strings.Contains(err.Error(), "DaemonSet aether-system/x") {
		t.Fatalf("a misspelled field: %v", err)
	}
}
