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
	obs := redgreen.Observation{Witness: "the suite's quic-go client's own checks of api-0's certificate (go-spiffe, then the DNS SANs against the SNI), api-0's app record, the mesh requests' answers", Facts: map[string]any{}}
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
	obs.Facts["identity_err"], obs.Facts["name_err"], obs.Facts["hostname_error"] = errString(s.identityErr), errString(s.nameErr), errors.As(s.nameErr, &hostErr)
	obs.Facts["probe_err"], obs.Facts["mesh_codes"], obs.Facts["app_xfcc"] = errString(perr), codes, xfcc
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

func nameFacts(o redgreen.Observation) (idErr, nameErr string, hostErr bool, codes map[int]int, xfcc map[string]int, probeErr string, err error) {
	var ok [6]bool
	idErr, ok[0] = o.Facts["identity_err"].(string)
	nameErr, ok[1] = o.Facts["name_err"].(string)
	hostErr, ok[2] = o.Facts["hostname_error"].(bool)
	codes, ok[3] = o.Facts["mesh_codes"].(map[int]int)
	xfcc, ok[4] = o.Facts["app_xfcc"].(map[string]int)
	probeErr, ok[5] = o.Facts["probe_err"].(string)
	for _, b := range ok {
		if !b {
			return "", "", false, nil, nil, "", errNothing
		}
	}
	return idErr, nameErr, hostErr, codes, xfcc, probeErr, nil
}

func checkNameError(o redgreen.Observation) error {
	idErr, nameErr, hostErr, codes, xfcc, _, err := nameFacts(o)
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
	idErr, nameErr, _, codes, xfcc, probeErr, err := nameFacts(o)
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
