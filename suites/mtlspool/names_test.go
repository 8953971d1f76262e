package mtlspool

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

const namesN = 5

// names calls api-0's inbound with the suite's client (identity, then
// name) and sends web-0's mesh requests to api.
func names(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "the suite's quic-go client's own checks of api-0's certificate (go-spiffe, then the DNS SANs against the SNI), api-0's app record, the mesh requests' answers"}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "web-0", "api", true)
	if err != nil {
		return obs, err
	}
	if p.certs, err = r.issue("names-probe", time.Hour, time.Time{}); err != nil {
		return obs, err
	}
	tag := "names-" + string(v)
	s, perr := p.get(ctx, "/"+tag+"/probe/0", false)
	codes, err := sendFrom(ctx, c, "api", tag, namesN, "web-0")
	if err != nil && codes[http.StatusServiceUnavailable] == 0 {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "api-0", "api", tag)
	if err != nil {
		return obs, err
	}
	var hostErr x509.HostnameError
	obs.Evidence = nameChecks{IdentityErr: errString(s.identityErr), NameErr: errString(s.nameErr), HostnameError: errors.As(s.nameErr, &hostErr),
		ProbeErr: errString(perr), MeshCodes: codes, AppXFCC: xfcc}
	obs.Summary = fmt.Sprintf("client: identity check %s, hostname check %s, request %s; %d mesh requests answered %v; api-0's app saw %s",
		orOK(s.identityErr), orOK(s.nameErr), orOK(perr), namesN, codes, toJSON(xfcc))
	return obs, c.Check(ctx)
}

func orOK(err error) string {
	if err == nil {
		return "ok"
	}
	return fmt.Sprintf("failed (%v)", err)
}

// nameChecks is a names case's evidence: the suite's client's identity
// and hostname checks of api-0's certificate (the latter's error, and
// whether it is a hostname error), its request's error, web-0's mesh
// requests' answers by status and the requests api-0's app saw by peer URI.
type nameChecks struct {
	IdentityErr   string         `json:"identity_err"`
	NameErr       string         `json:"name_err"`
	HostnameError bool           `json:"hostname_error"`
	ProbeErr      string         `json:"probe_err"`
	MeshCodes     map[int]int    `json:"mesh_codes"`
	AppXFCC       map[string]int `json:"app_xfcc"`
}

func nameEvidence(o redgreen.Observation) (idErr, nameErr string, hostErr bool, codes map[int]int, xfcc map[string]int, probeErr string, err error) {
	ev, err := redgreen.EvidenceOf[nameChecks](o)
	if err != nil {
		return "", "", false, nil, nil, "", err
	}
	return ev.IdentityErr, ev.NameErr, ev.HostnameError, ev.MeshCodes, ev.AppXFCC, ev.ProbeErr, nil
}

func checkNameError(o redgreen.Observation) error {
	idErr, nameErr, hostErr, codes, xfcc, _, err := nameEvidence(o)
	if err != nil {
		return err
	}
	if idErr != "" {
		return fmt.Errorf("the SPIFFE identity check failed (%s): the signature is a name error after a verified identity", idErr)
	}
	if !hostErr {
		return fmt.Errorf("the hostname check did not fail with a hostname error (%q)", nameErr)
	}
	if codes[http.StatusServiceUnavailable] != namesN {
		return fmt.Errorf("web-0's mesh requests answered %v, want %d × 503", codes, namesN)
	}
	if len(xfcc) != 0 {
		return fmt.Errorf("api-0's app saw %s, want nothing", toJSON(xfcc))
	}
	return nil
}

func checkNameOK(o redgreen.Observation) error {
	idErr, nameErr, _, codes, xfcc, probeErr, err := nameEvidence(o)
	if err != nil {
		return err
	}
	if idErr != "" || nameErr != "" || probeErr != "" {
		return fmt.Errorf("the client's checks or request failed: identity %q, name %q, request %q", idErr, nameErr, probeErr)
	}
	if !allOK(codes, namesN) {
		return fmt.Errorf("web-0's mesh requests answered %v, want %d × 200", codes, namesN)
	}
	if xfcc[spiffeID("web")] != namesN || xfcc[spiffeID("names-probe")] != 1 {
		return fmt.Errorf("api-0's app saw %s, want web %d times and the client once", toJSON(xfcc), namesN)
	}
	return nil
}
