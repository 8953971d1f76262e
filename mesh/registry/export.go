package registry

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Export is what one cluster tells the others of itself: who it is, where
// its east-west gateway listens, and the services that gateway forwards,
// each with the port whose SNI names it and the SPIFFE IDs its pods
// present. It holds no key and no endpoint of a pod: a remote source
// reaches the service only through the gateway, and the gateway forwards
// by SNI without terminating (ARCHITECTURE.md, "Two clusters").
//
// Its file form is YAML or JSON:
//
//	cluster: cluster-2
//	trustDomain: cluster-2.aether.test
//	meshDomain: mesh.test
//	gateway: 172.30.0.20:18009
//	services:
//	  - name: dst-a
//	    namespace: demo
//	    port: 8080
//	    accounts: [spiffe://cluster-2.aether.test/ns/demo/sa/dst-a]
type Export struct {
	Cluster     string            `json:"cluster"`
	TrustDomain string            `json:"trustDomain"`
	MeshDomain  string            `json:"meshDomain"`
	Gateway     string            `json:"gateway"`
	Services    []ExportedService `json:"services"`
}

// ExportedService is one service an Export offers.
type ExportedService struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Port is the service's HTTP port: the one the SNI names.
	Port uint16 `json:"port"`
	// Accounts are the SPIFFE IDs a destination pod may present, each in
	// the exporting cluster's trust domain.
	Accounts []string `json:"accounts"`
	// QUIC says each account's SVID names the port's SNI in its DNS SANs,
	// as an east-west QUIC twin's client checks after the SPIFFE ID: a
	// remote source may reach the service over its twin, else over h2.
	QUIC bool `json:"quic,omitempty"`
}

// RemoteService is a service of another cluster as the local mesh sees it:
// reached at that cluster's gateway, by the SNI of Port in MeshDomain,
// accepting only Accounts.
type RemoteService struct {
	Name, Namespace string
	// Cluster names the exporting cluster.
	Cluster     string
	TrustDomain spiffeid.TrustDomain
	MeshDomain  string
	Port        uint16
	Accounts    []string
	// QUIC is the export's word that a twin's handshake can succeed.
	QUIC bool
	// Gateway is the exporting cluster's gateway, on EastWestTunnelPort.
	Gateway netip.AddrPort
}

func (r *RemoteService) Key() Key { return Key{r.Namespace, r.Name} }

// RemoteService returns the remote service with key k.
func (st *State) RemoteService(k Key) (*RemoteService, bool) {
	for i := range st.Remote {
		if st.Remote[i].Key() == k {
			return &st.Remote[i], true
		}
	}
	return nil, false
}

// ExportOf is the export of cluster from its state: the services its
// gateway node exposes that have a ready endpoint, each with its HTTP port
// and the SPIFFE IDs (in trustDomain) of its ready endpoints' accounts. A
// state without a gateway node has nothing to export.
func ExportOf(st *State, cluster, trustDomain, meshDomain string) (*Export, error) {
	td, err := spiffeid.TrustDomainFromString(trustDomain)
	if err != nil {
		return nil, fmt.Errorf("export of cluster %q: trust domain %q: %w", cluster, trustDomain, err)
	}
	gw := st.gateway()
	if gw == nil {
		return nil, fmt.Errorf("export of cluster %q: no node is its east-west gateway", cluster)
	}
	ex := &Export{Cluster: cluster, TrustDomain: td.Name(), MeshDomain: meshDomain,
		Gateway: netip.AddrPortFrom(gw.Address, constants.EastWestTunnelPort).String()}
	for _, k := range gw.Exposes {
		svc, ok := st.Service(k)
		if !ok {
			continue
		}
		sp, ok := svc.HTTPPort()
		if !ok {
			continue
		}
		es := ExportedService{Name: svc.Name, Namespace: svc.Namespace, Port: sp.Port, QUIC: true}
		sni := xdsnames.SNI(sp.Port, svc.Name, svc.Namespace, meshDomain)
		for _, ep := range st.ReadyEndpoints(k) {
			for i := range st.Pods {
				p := &st.Pods[i]
				if p.Namespace != k.Namespace || p.Name != ep.Pod {
					continue
				}
				a := identity.Account{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}
				id, err := identity.ID(td, a)
				if err != nil {
					return nil, fmt.Errorf("export of cluster %q: service %s: %w", cluster, k, err)
				}
				if !slices.Contains(es.Accounts, id.String()) {
					es.Accounts = append(es.Accounts, id.String())
					es.QUIC = es.QUIC && identity.NamesServer(a, meshDomain, sni)
				}
			}
		}
		if len(es.Accounts) == 0 {
			continue
		}
		slices.Sort(es.Accounts)
		ex.Services = append(ex.Services, es)
	}
	return ex, nil
}

// gateway is the cluster's east-west gateway, nil when no node is one (the
// registry allows at most one).
func (st *State) gateway() *Gateway {
	for i := range st.Nodes {
		if st.Nodes[i].Gateway != nil {
			return st.Nodes[i].Gateway
		}
	}
	return nil
}

// WriteExportFile writes ex to path atomically (a temporary file renamed
// over), so an agent polling it never reads half a file.
func WriteExportFile(path string, ex *Export) error {
	b, err := yaml.Marshal(ex)
	if err != nil {
		return fmt.Errorf("failed to encode the export of %q: %w", ex.Cluster, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("failed to write export file %q: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("failed to write export file %q: %w", path, err)
	}
	return nil
}

// ParseExport reads and checks an export; name labels every error, and
// every problem is reported at once, by its field.
func ParseExport(name string, data []byte) ([]RemoteService, *Export, error) {
	var ex Export
	if err := yaml.UnmarshalStrict(data, &ex); err != nil {
		return nil, nil, fmt.Errorf("failed to parse export file %q: %w", name, err)
	}
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{File: name, Field: field, Err: err})
	}
	if ex.Cluster == "" {
		bad("cluster", errors.New("must name the exporting cluster"))
	}
	td, err := spiffeid.TrustDomainFromString(ex.TrustDomain)
	if err != nil {
		bad("trustDomain", err)
	}
	if ex.MeshDomain == "" {
		bad("meshDomain", errors.New("must name the exporting cluster's mesh domain (its SNIs end in it)"))
	}
	gw, err := netip.ParseAddrPort(ex.Gateway)
	if err != nil {
		bad("gateway", fmt.Errorf("want <ip>:%d, got %q", constants.EastWestTunnelPort, ex.Gateway))
	} else if gw.Port() != constants.EastWestTunnelPort {
		bad("gateway", fmt.Errorf("port %d: the gateway listens on %d", gw.Port(), constants.EastWestTunnelPort))
	}
	var out []RemoteService
	seen := map[Key]bool{}
	for i, s := range ex.Services {
		field := fmt.Sprintf("services[%d]", i)
		k := Key{Namespace: s.Namespace, Name: s.Name}
		switch {
		case s.Name == "" || s.Namespace == "":
			bad(field, errors.New("must have a name and a namespace"))
			continue
		case seen[k]:
			bad(field, fmt.Errorf("service %s is exported twice", k))
			continue
		case s.Port == 0:
			bad(field+".port", errors.New("must be 1-65535"))
			continue
		case len(s.Accounts) == 0:
			bad(field+".accounts", errors.New("must list the SPIFFE IDs of the service's pods: without them no peer could be accepted"))
			continue
		}
		seen[k] = true
		for j, a := range s.Accounts {
			id, err := spiffeid.FromString(a)
			if err != nil {
				bad(fmt.Sprintf("%s.accounts[%d]", field, j), err)
			} else if !td.IsZero() && id.TrustDomain() != td {
				bad(fmt.Sprintf("%s.accounts[%d]", field, j), fmt.Errorf("%s is not in the exporting cluster's trust domain %q", a, td.Name()))
			}
		}
		out = append(out, RemoteService{Name: s.Name, Namespace: s.Namespace, Cluster: ex.Cluster, TrustDomain: td,
			MeshDomain: ex.MeshDomain, Port: s.Port, QUIC: s.QUIC, Accounts: slices.Sorted(slices.Values(s.Accounts)), Gateway: gw})
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return out, &ex, nil
}

// LoadExportFile reads and checks an export file.
func LoadExportFile(path string) ([]RemoteService, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read export file %q: %w", path, err)
	}
	rs, _, err := ParseExport(path, data)
	return rs, err
}

// WithRemotes sets st's remote services: every service of the exports
// that the cluster does not define itself, in key order. A service the
// cluster has of its own is served by its own pods and the remote one is
// left out, so a local name never leaves the cluster; two exports
// offering the same service is an error naming both.
func (st *State) WithRemotes(exports ...[]RemoteService) error {
	st.Remote = nil
	from := map[Key]string{}
	for _, rs := range exports {
		for _, r := range rs {
			k := r.Key()
			if c, dup := from[k]; dup {
				return fmt.Errorf("remote service %s is exported by both cluster %q and cluster %q", k, c, r.Cluster)
			}
			from[k] = r.Cluster
			if _, local := st.Service(k); local {
				continue
			}
			st.Remote = append(st.Remote, r)
		}
	}
	slices.SortFunc(st.Remote, func(a, b RemoteService) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return nil
}
