package bench

import (
	"bytes"
	"embed"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// The peers' configurations are files in the repository (peers/), rendered
// with the rig's addresses and certificate files.
//
//go:embed peers/*
var peerFiles embed.FS

// Side is which node a peer proxy runs on: Out on the source's node (the
// pod's HTTP/1.1 in, mTLS out), In on the destination's (mTLS in, the
// app's HTTP/1.1 out).
type Side string

const (
	Out Side = "out"
	In  Side = "in"
)

// Peer is a real proxy the mesh is measured against.
type Peer string

const (
	HAProxy Peer = "haproxy"
	Nginx   Peer = "nginx"
)

// PeerConfig is what a peer's template reads.
type PeerConfig struct {
	// Listen is the address the peer binds; Upstream where it forwards.
	Listen, Upstream netip.AddrPort
	// ServerName is the destination's SPIFFE DNS SAN, sent as SNI and
	// verified on the destination's certificate.
	ServerName string
	// Cert and Key are this side's SVID (PEM), CertKey both in one file
	// (HAProxy's crt), Bundle the mesh's trust bundle.
	Cert, Key, CertKey, Bundle string
	// Threads is the peer's worker threads (HAProxy) or processes (nginx),
	// as Istio's method gives each proxy two workers.
	Threads int
	// Dir holds the peer's pid, error log and temporary files.
	Dir string
}

func (c PeerConfig) check() error {
	var missing []string
	for name, v := range map[string]string{"ServerName": c.ServerName, "Cert": c.Cert, "Key": c.Key, "CertKey": c.CertKey, "Bundle": c.Bundle, "Dir": c.Dir} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if !c.Listen.IsValid() {
		missing = append(missing, "Listen")
	}
	if !c.Upstream.IsValid() {
		missing = append(missing, "Upstream")
	}
	if c.Threads < 1 {
		missing = append(missing, "Threads")
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		return fmt.Errorf("peer config: %s unset", strings.Join(missing, ", "))
	}
	return nil
}

// templateName is the file in peers/ of p's side s.
func templateName(p Peer, s Side) (string, error) {
	switch p {
	case HAProxy:
		return "peers/haproxy-" + string(s) + ".cfg", nil
	case Nginx:
		return "peers/nginx-" + string(s) + ".conf", nil
	}
	return "", fmt.Errorf("unknown peer %q (want %q or %q)", p, HAProxy, Nginx)
}

// RenderPeer renders peer p's configuration for side s. A template that
// names a field PeerConfig lacks is an error, not an empty string.
func RenderPeer(p Peer, s Side, c PeerConfig) ([]byte, error) {
	if s != Out && s != In {
		return nil, fmt.Errorf("peer %s: unknown side %q (want %q or %q)", p, s, Out, In)
	}
	name, err := templateName(p, s)
	if err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("peer %s %s: %w", p, s, err)
	}
	src, err := peerFiles.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("peer %s %s: %w", p, s, err)
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("peer template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, c); err != nil {
		return nil, fmt.Errorf("peer template %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// WritePeer renders and writes p's side s configuration into c.Dir and
// returns the file's path and the command that runs the peer in the
// foreground with it.
func WritePeer(p Peer, s Side, c PeerConfig) (path string, argv []string, err error) {
	b, err := RenderPeer(p, s, c)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("peer %s %s: %w", p, s, err)
	}
	if p == Nginx {
		// nginx refuses to start when a temporary path is missing.
		for _, d := range []string{"body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
				return "", nil, fmt.Errorf("peer %s %s: %w", p, s, err)
			}
		}
	}
	name, _ := templateName(p, s)
	path = filepath.Join(c.Dir, filepath.Base(name))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", nil, fmt.Errorf("peer %s %s: %w", p, s, err)
	}
	switch p {
	case HAProxy:
		// -db: foreground, no daemon, no master: one process whose threads
		// are the proxy.
		argv = []string{"haproxy", "-db", "-f", path}
	default:
		// -e: its early error log goes beside the configuration, not to
		// the package's /var/log path.
		argv = []string{"nginx", "-e", filepath.Join(c.Dir, "error.log"), "-p", c.Dir, "-c", path}
	}
	return path, argv, nil
}
