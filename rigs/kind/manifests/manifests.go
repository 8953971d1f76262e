// Package manifests renders the Kubernetes objects of an e2e run from Go
// templates: the mesh install (the namespace, the Gateway API UDPRoute CRD,
// the agent's RBAC, the CNI DaemonSet, the agent + proxy DaemonSet) and a
// scenario's workloads (the test namespace, echo pods pinned to nodes,
// Services with the scenario's ClusterIPs, UDPRoutes). Decode reads them
// back strictly: a field no type defines is an error, not a silent drop.
package manifests

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

//go:embed templates/*.yaml.tmpl workloads/*.yaml.tmpl crds/*.yaml
var files embed.FS

// Values parameterise the mesh install.
type Values struct {
	// Namespace holds the mesh's DaemonSets and RBAC.
	Namespace string
	Mode      constants.CaptureMode
	// Images are the tags rigs/images builds; nothing is pulled.
	CNIImage, AgentImage, TestAppImage string
	// SocketDir is the node dir holding the agent's xDS and handoff sockets.
	SocketDir string
	// CNIBinDir and CNIConfDir are the node's CNI dirs.
	CNIBinDir, CNIConfDir string
	// ExcludeNamespaces are left alone by aether-cni.
	ExcludeNamespaces []string
	// APIServer is the URL the agents reach the API server at. The
	// default is the kubernetes Service by name, which needs cluster DNS
	// and kube-proxy; a cluster without them names the control plane.
	APIServer string
	// MTLS, when set, turns on the mTLS HTTP/2 path in every agent and
	// gives each test pod's HTTP echo its own mTLS port.
	MTLS *MTLS
}

// MTLS is the mTLS HTTP/2 path of an install.
type MTLS struct {
	TrustDomain, MeshDomain string
	// UpstreamCert is the agents' --upstream-cert.
	UpstreamCert string
	// MeshTransport is the agents' --mesh-transport, h2 when empty.
	MeshTransport string
	// ControlArgs are test-only agent flags a suite's control needs.
	ControlArgs []string
	// CA is the CA file (identity.CAFile: the root and its key, PEM) every
	// agent signs with, handed to them as a Secret.
	CA string
	// Echo, when set, is the HTTP echo's own mTLS port.
	Echo *EchoTLS
}

// EchoTLS is the test app's own mTLS port with its SVID, key and bundle
// (PEM), handed to the pods as a Secret in each scenario namespace.
type EchoTLS struct {
	Port              int
	Cert, Key, Bundle string
}

// Where the pods see the Secrets.
const (
	CADir   = "/etc/aether/ca"
	EchoDir = "/etc/aether-echo"
	// AccessLogDir is the node dir of the proxies' access logs.
	AccessLogDir = "/var/log/aether"
)

// EchoTLSArg is the HTTP echo's --tls value for an install's echo port.
func (m *MTLS) EchoTLSArg() string {
	return fmt.Sprintf("%d,%s/svid.pem,%s/key.pem,%s/bundle.pem,%s", m.Echo.Port, EchoDir, EchoDir, EchoDir, m.TrustDomain)
}

// Defaults are the values of a kind node.
func Defaults() Values {
	return Values{
		Namespace:         "aether-system",
		APIServer:         "https://kubernetes.default.svc",
		Mode:              constants.CaptureTProxy,
		SocketDir:         "/run/aether",
		CNIBinDir:         "/opt/cni/bin",
		CNIConfDir:        "/etc/cni/net.d",
		ExcludeNamespaces: []string{"kube-system", "aether-system", "local-path-storage"},
	}
}

func (v Values) check() error {
	if _, err := constants.ParseCaptureMode(string(v.Mode)); err != nil {
		return fmt.Errorf("values: field Mode: %w", err)
	}
	for name, s := range map[string]string{"APIServer": v.APIServer, "Namespace": v.Namespace, "CNIImage": v.CNIImage, "AgentImage": v.AgentImage,
		"TestAppImage": v.TestAppImage, "SocketDir": v.SocketDir, "CNIBinDir": v.CNIBinDir, "CNIConfDir": v.CNIConfDir} {
		if s == "" {
			return fmt.Errorf("values: field %s is empty", name)
		}
	}
	if m := v.MTLS; m != nil {
		for name, s := range map[string]string{"TrustDomain": m.TrustDomain, "MeshDomain": m.MeshDomain, "UpstreamCert": m.UpstreamCert, "CA": m.CA} {
			if s == "" {
				return fmt.Errorf("values: field MTLS.%s is empty", name)
			}
		}
		if e := m.Echo; e != nil && (e.Port < 1 || e.Port > 65535 || e.Cert == "" || e.Key == "" || e.Bundle == "") {
			return fmt.Errorf("values: field MTLS.Echo: port %d with cert, key and bundle wanted", e.Port)
		}
	}
	return nil
}

var funcs = template.FuncMap{
	"join":         strings.Join,
	"caDir":        func() string { return CADir },
	"echoDir":      func() string { return EchoDir },
	"accessLogDir": func() string { return AccessLogDir },
	// json writes a value as YAML flow (JSON is YAML), so no label or
	// argument needs quoting by hand.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// Mesh renders the mesh install as one multi-document YAML stream, CRDs
// first so the objects that need them come after.
func Mesh(v Values) ([]byte, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	crds, err := fs.Glob(files, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		b, err := files.ReadFile(c)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if err := execute(&out, files, "templates/*.yaml.tmpl", v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func execute(out *bytes.Buffer, fsys fs.FS, pattern string, data any) error {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		t, err := template.New(path.Base(n)).Funcs(funcs).Option("missingkey=error").ParseFS(fsys, n)
		if err != nil {
			return fmt.Errorf("template %s: %w", n, err)
		}
		out.WriteString("\n---\n")
		if err := t.Execute(out, data); err != nil {
			return fmt.Errorf("template %s: %w", n, err)
		}
	}
	return nil
}

// Workload is one pod of a scenario as the pod template needs it.
type Workload struct {
	registry.ScenarioPod
	Args []string
}

type workloads struct {
	TestAppImage string
	// Echo is the HTTP echo's own mTLS port, when the install has one; its
	// Secret goes in every namespace holding a pod (default included).
	Echo            *EchoTLS
	PodNamespaces   []string
	Namespaces      []string
	Pods            []Workload
	ServiceAccounts []registry.ScenarioServiceAccount
	Services        []registry.ScenarioService
	UDPRoutes       []registry.ScenarioUDPRoute
}

// Workloads renders a scenario's objects. nodes maps each scenario node to
// the cluster node its pods are pinned to.
func Workloads(v Values, sc registry.Scenario, nodes map[string]string) ([]byte, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	if len(sc.Endpoints) > 0 {
		return nil, errors.New("scenario: field endpoints: explicit endpoints have no Kubernetes form here; select pods with a Service selector")
	}
	w := workloads{TestAppImage: v.TestAppImage, ServiceAccounts: sc.ServiceAccounts, UDPRoutes: sc.UDPRoutes}
	udp, tcp, http := targetPorts(sc.Services)
	seen := map[string]bool{}
	addNS := func(ns string) string {
		if ns == "" {
			ns = "default"
		}
		if !seen[ns] && ns != "default" {
			seen[ns] = true
			w.Namespaces = append(w.Namespaces, ns)
		}
		return ns
	}
	for _, p := range sc.Pods {
		p.Namespace = addNS(p.Namespace)
		node, ok := nodes[p.Node]
		if !ok {
			return nil, fmt.Errorf("scenario: pod %s/%s: field node: %q maps to no cluster node", p.Namespace, p.Name, p.Node)
		}
		p.Node = node
		if !slices.Contains(w.PodNamespaces, p.Namespace) {
			w.PodNamespaces = append(w.PodNamespaces, p.Namespace)
		}
		args := []string{"--name", p.Name, "--record", "/dev/stdout", "--udp", udp, "--tcp", tcp}
		if http != "" {
			args = append(args, "--http", http)
		}
		if v.MTLS != nil && v.MTLS.Echo != nil {
			w.Echo = v.MTLS.Echo
			args = append(args, "--tls", v.MTLS.EchoTLSArg())
		}
		w.Pods = append(w.Pods, Workload{ScenarioPod: p, Args: args})
	}
	for i := range w.ServiceAccounts {
		w.ServiceAccounts[i].Namespace = addNS(w.ServiceAccounts[i].Namespace)
	}
	for _, s := range sc.Services {
		s.Namespace = addNS(s.Namespace)
		s.Ports = append([]registry.ScenarioServicePort(nil), s.Ports...)
		for i := range s.Ports {
			if s.Ports[i].Protocol == "" {
				s.Ports[i].Protocol = "TCP"
			}
			if s.Ports[i].TargetPort == 0 {
				s.Ports[i].TargetPort = s.Ports[i].Port
			}
		}
		w.Services = append(w.Services, s)
	}
	sort.Strings(w.Namespaces)
	sort.Strings(w.PodNamespaces)
	var out bytes.Buffer
	if err := execute(&out, files, "workloads/*.yaml.tmpl", w); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// targetPorts lists, comma-separated, every UDP, TCP and HTTP target port
// the services name: every backend binds them all, as on the netns
// cluster, so any pod can become any service's endpoint while the cluster
// is up. A TCP port with appProtocol http is the HTTP echo's.
func targetPorts(svcs []registry.ScenarioService) (udp, tcp, http string) {
	u, t, h := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, s := range svcs {
		for _, p := range s.Ports {
			port := p.TargetPort
			if port == 0 {
				port = p.Port
			}
			switch {
			case strings.EqualFold(p.Protocol, "UDP"):
				u[port] = true
			case p.AppProtocol == registry.AppProtocolHTTP:
				h[port] = true
			default:
				t[port] = true
			}
		}
	}
	return list(u), list(t), list(h)
}

func list(m map[int]bool) string {
	var ports []int
	for p := range m {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// Scheme knows every kind the manifests render: client-go's built-ins,
// CustomResourceDefinitions and Gateway API v1alpha2.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, apiextensionsv1.AddToScheme, gwv1alpha2.Install} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("failed to build the manifests' scheme: %w", err)
		}
	}
	return s, nil
}

// Decode splits a YAML stream into documents and decodes each into its
// typed object, strictly: an unknown or duplicated field is an error that
// names the document and the field. Empty documents are skipped.
func Decode(stream []byte) ([]runtime.Object, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	dec := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, describe(doc), err)
		}
		if gvk == nil {
			return nil, fmt.Errorf("document %d (%s): no kind", i, describe(doc))
		}
		out = append(out, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// describe names a document by kind and name for an error message, read
// leniently since the document may be the one that failed.
func describe(doc []byte) string {
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &m); err != nil || m.Kind == "" {
		return "unnamed"
	}
	if m.Metadata.Namespace != "" {
		return m.Kind + " " + m.Metadata.Namespace + "/" + m.Metadata.Name
	}
	return m.Kind + " " + m.Metadata.Name
}
