package manifests

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/registry"
)

func mtlsValues() Values {
	v := testValues()
	v.MTLS = &MTLS{TrustDomain: "aether.test", MeshDomain: "mesh.test", UpstreamCert: "static", CA: "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n",
		Echo: &EchoTLS{Port: 7443, Cert: "svid-pem\n", Key: "key-pem\n", Bundle: "bundle-pem\n"}}
	return v
}

// With the mTLS path on, the agent gets the path's flags and reads the CA
// from the Secret the install carries; the proxy appends its access log on
// the node. Without it, the install has none of them.
func TestMeshWithMTLSCarriesTheCAAndTheAgentsFlags(t *testing.T) {
	v := mtlsValues()
	objs := decodeMesh(t, v)
	sec, ok := objs["Secret/aether-ca"].(*corev1.Secret)
	if !ok || sec.Namespace != v.Namespace || sec.StringData["ca.pem"] != v.MTLS.CA {
		t.Fatalf("the CA Secret: %+v", objs["Secret/aether-ca"])
	}
	ps := objs["DaemonSet/aether-node"].(*appsv1.DaemonSet).Spec.Template.Spec
	agent, proxy := container(t, ps, "agent"), container(t, ps, "proxy")
	for _, flag := range []string{"--trust-domain=aether.test", "--mesh-domain=mesh.test", "--ca-dir=" + CADir,
		"--access-log-dir=" + AccessLogDir, "--upstream-cert=static"} {
		if !slices.Contains(agent.Args, flag) {
			t.Errorf("agent args %q lack %s", agent.Args, flag)
		}
	}
	if vol := secretVolume(t, ps, agent, CADir); vol != "aether-ca" {
		t.Errorf("the agent's %s is Secret %q, want aether-ca", CADir, vol)
	}
	if host, _ := mount(t, ps, proxy, AccessLogDir); host != AccessLogDir {
		t.Errorf("the proxy's access log dir is the node's %s, want %s", host, AccessLogDir)
	}

	plain := decodeMesh(t, testValues())
	if _, ok := plain["Secret/aether-ca"]; ok {
		t.Error("an install without the mTLS path carries a CA Secret")
	}
	ps = plain["DaemonSet/aether-node"].(*appsv1.DaemonSet).Spec.Template.Spec
	for _, a := range container(t, ps, "agent").Args {
		if strings.HasPrefix(a, "--trust-domain") || strings.HasPrefix(a, "--ca-dir") {
			t.Errorf("an install without the mTLS path gives the agent %s", a)
		}
	}
	if hasVolume(ps, "ca") || hasVolume(ps, "access-log") {
		t.Errorf("an install without the mTLS path has its volumes: %+v", ps.Volumes)
	}

	v.MTLS.CA = ""
	if _, err := Mesh(v); err == nil || !strings.Contains(err.Error(), "MTLS.CA") {
		t.Errorf("no CA: %v", err)
	}
}

// secretVolume returns the Secret behind a container's mount at path.
func secretVolume(t *testing.T, ps corev1.PodSpec, c corev1.Container, path string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("container %s: %s is writable", c.Name, path)
		}
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	t.Fatalf("container %s mounts no Secret at %s", c.Name, path)
	return ""
}

func hasVolume(ps corev1.PodSpec, name string) bool {
	return slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == name })
}

func mtlsScenario(t *testing.T) registry.Scenario {
	t.Helper()
	b, err := os.ReadFile("../../../fixtures/scenarios/mtls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sc registry.Scenario
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// The mTLS scenario's pods run the HTTP echo on the appProtocol http
// target port (not as a plain TCP line echo) and its own mTLS port from the
// namespace's Secret; the Service keeps appProtocol http, which puts the
// port on the mesh's mTLS path.
func TestMTLSWorkloadsServeTheHTTPEchoAndItsTLSPort(t *testing.T) {
	v := mtlsValues()
	b, err := Workloads(v, mtlsScenario(t), map[string]string{"node-a": "w1", "node-b": "w2"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var secrets, pods int
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Secret:
			secrets++
			want := map[string]string{"svid.pem": v.MTLS.Echo.Cert, "key.pem": v.MTLS.Echo.Key, "bundle.pem": v.MTLS.Echo.Bundle}
			if x.Name != "aether-echo-tls" || x.Namespace != "demo" || !equalMaps(x.StringData, want) {
				t.Errorf("echo Secret %s/%s: %v", x.Namespace, x.Name, x.StringData)
			}
		case *corev1.Pod:
			pods++
			c := x.Spec.Containers[0]
			want := []string{"--name", x.Name, "--record", "/dev/stdout", "--udp", "", "--tcp", "", "--http", "7080",
				"--tls", "7443," + EchoDir + "/svid.pem," + EchoDir + "/key.pem," + EchoDir + "/bundle.pem,aether.test"}
			if !slices.Equal(c.Args, want) {
				t.Errorf("pod %s: args %q, want %q", x.Name, c.Args, want)
			}
			if vol := secretVolume(t, x.Spec, c, EchoDir); vol != "aether-echo-tls" {
				t.Errorf("pod %s: %s is Secret %q", x.Name, EchoDir, vol)
			}
		case *corev1.Service:
			p := x.Spec.Ports[0]
			if p.AppProtocol == nil || *p.AppProtocol != registry.AppProtocolHTTP || p.TargetPort.IntValue() != 7080 {
				t.Errorf("service %s port: %+v, want appProtocol http to 7080", x.Name, p)
			}
		}
	}
	if secrets != 1 || pods != 3 {
		t.Errorf("%d echo Secrets and %d pods, want 1 and 3", secrets, pods)
	}

	// Pods of the default namespace (which is not rendered) mount the
	// Secret too: it is rendered there.
	sc := mtlsScenario(t)
	for i := range sc.Pods {
		sc.Pods[i].Namespace = ""
	}
	for i := range sc.Services {
		sc.Services[i].Namespace = ""
	}
	for i := range sc.ServiceAccounts {
		sc.ServiceAccounts[i].Namespace = ""
	}
	b, err = Workloads(v, sc, map[string]string{"node-a": "w1", "node-b": "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if objs, err = Decode(b); err != nil {
		t.Fatal(err)
	}
	secrets = 0
	for _, o := range objs {
		if x, ok := o.(*corev1.Secret); ok && x.Name == "aether-echo-tls" && x.Namespace == "default" {
			secrets++
		}
	}
	if secrets != 1 {
		t.Errorf("pods in the default namespace: %d echo Secrets there, want 1", secrets)
	}

	// Without the echo's TLS port the pods serve the HTTP echo alone and
	// no Secret is rendered.
	v.MTLS.Echo = nil
	b, err = Workloads(v, mtlsScenario(t), map[string]string{"node-a": "w1", "node-b": "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "aether-echo-tls") || strings.Contains(string(b), "--tls") {
		t.Errorf("workloads without the echo's TLS port mention it:\n%s", b)
	}
}

// TestServiceAccountsComeBeforeTheirPods: the workloads are applied in
// stream order, and the API server's ServiceAccount admission refuses a pod
// whose account does not exist yet ("error looking up service account
// demo/sa-a"), which is how the mtls suite first failed on a real cluster.
func TestServiceAccountsComeBeforeTheirPods(t *testing.T) {
	b, err := Workloads(mtlsValues(), mtlsScenario(t), map[string]string{"node-a": "w1", "node-b": "w2"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	pods := 0
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.ServiceAccount:
			made[x.Namespace+"/"+x.Name] = true
		case *corev1.Pod:
			if sa := x.Spec.ServiceAccountName; sa != "" {
				pods++
				if !made[x.Namespace+"/"+sa] {
					t.Errorf("pod %s/%s names service account %s before the stream creates it", x.Namespace, x.Name, sa)
				}
			}
		}
	}
	if pods == 0 {
		t.Fatal("the mTLS scenario's pods name no service account: the test checks nothing")
	}
}
