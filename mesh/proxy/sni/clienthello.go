// Package sni reads the server name (and ALPN) a client asks for, without
// terminating anything: from a TLS ClientHello on a TCP stream (tls.go,
// Envoy's tls_inspector semantics) and from the ClientHello carried in the
// CRYPTO frames of a QUIC client's Initial packets (quic.go, RFC 9001 §5:
// Initial keys are derived from the client's destination connection ID, so
// anyone on the path can read them, which is what makes SNI passthrough of
// QUIC possible at all). Nothing here holds a key of the mesh.
//
// What it buffers is bounded by the caller's limit (the ClientHello's size,
// as tls_inspector's max_client_hello_size); the parsers are fuzzed
// (FuzzClientHello, FuzzInitial).
package sni

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/cryptobyte"
)

// DefaultMaxClientHello is Envoy tls_inspector's default
// max_client_hello_size, 16 KiB; quic-go caps a crypto stream at 16 KiB
// too.
const DefaultMaxClientHello = 16 << 10

// TLS constants the parser reads.
const (
	handshakeClientHello = 1
	extServerName        = 0
	extALPN              = 16
	nameTypeHostName     = 0
)

// ErrMalformed is wrapped by every error about bytes that do not form a
// ClientHello.
var ErrMalformed = errors.New("malformed ClientHello")

// ErrTooLarge: the ClientHello is larger than the limit the caller set.
var ErrTooLarge = errors.New("ClientHello larger than the limit")

// ClientHello is what a forwarder routes on.
type ClientHello struct {
	// ServerName is the SNI host_name, lower-cased and without a trailing
	// dot, as server_names are matched; empty when the client sent none.
	ServerName string
	// ALPN is the client's protocol list, in its order.
	ALPN []string
}

func malformed(what string) error { return fmt.Errorf("%w: %s", ErrMalformed, what) }

// ParseClientHello parses one whole handshake message (type, 24-bit
// length, body) that must be a ClientHello, and nothing after it.
func ParseClientHello(msg []byte) (ClientHello, error) {
	var hello ClientHello
	s := cryptobyte.String(msg)
	var typ uint8
	var body cryptobyte.String
	if !s.ReadUint8(&typ) {
		return hello, malformed("no handshake type")
	}
	if typ != handshakeClientHello {
		return hello, malformed(fmt.Sprintf("handshake type %d is not ClientHello (1)", typ))
	}
	if !s.ReadUint24LengthPrefixed(&body) {
		return hello, malformed("handshake length exceeds the message")
	}
	if !s.Empty() {
		return hello, malformed(fmt.Sprintf("%d bytes after the ClientHello", len(s)))
	}
	var version uint16
	var random, sessionID, suites, compression cryptobyte.String
	if !body.ReadUint16(&version) || !body.ReadBytes((*[]byte)(&random), 32) {
		return hello, malformed("truncated before the session id")
	}
	if !body.ReadUint8LengthPrefixed(&sessionID) || len(sessionID) > 32 {
		return hello, malformed("bad legacy_session_id")
	}
	if !body.ReadUint16LengthPrefixed(&suites) || len(suites) == 0 || len(suites)%2 != 0 {
		return hello, malformed("bad cipher_suites")
	}
	if !body.ReadUint8LengthPrefixed(&compression) || len(compression) == 0 {
		return hello, malformed("bad legacy_compression_methods")
	}
	if body.Empty() {
		// A ClientHello may end here (no extensions): no SNI, no ALPN.
		return hello, nil
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return hello, malformed("bad extensions block")
	}
	seen := map[uint16]bool{}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return hello, malformed("truncated extension")
		}
		if seen[typ] {
			return hello, malformed(fmt.Sprintf("extension %d twice", typ))
		}
		seen[typ] = true
		var err error
		switch typ {
		case extServerName:
			hello.ServerName, err = parseServerName(data)
		case extALPN:
			hello.ALPN, err = parseALPN(data)
		}
		if err != nil {
			return ClientHello{}, err
		}
	}
	return hello, nil
}

// parseServerName reads the server_name extension (RFC 6066 §3): the
// first host_name entry.
func parseServerName(data cryptobyte.String) (string, error) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
		return "", malformed("bad server_name list")
	}
	for !list.Empty() {
		var nameType uint8
		var name cryptobyte.String
		if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&name) {
			return "", malformed("truncated server_name entry")
		}
		if nameType != nameTypeHostName {
			continue
		}
		host := strings.TrimSuffix(string(name), ".")
		if err := checkHostName(host); err != nil {
			return "", err
		}
		return strings.ToLower(host), nil
	}
	return "", nil
}

// checkHostName refuses what cannot be a DNS name: the name is matched
// against server_names and lands in logs and labels.
func checkHostName(host string) error {
	if host == "" || len(host) > 253 {
		return malformed(fmt.Sprintf("server name of %d bytes", len(host)))
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c <= ' ' || c >= 0x7f {
			return malformed(fmt.Sprintf("server name byte 0x%02x at %d", c, i))
		}
	}
	return nil
}

// parseALPN reads application_layer_protocol_negotiation (RFC 7301).
func parseALPN(data cryptobyte.String) ([]string, error) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
		return nil, malformed("bad ALPN list")
	}
	var out []string
	for !list.Empty() {
		var proto cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&proto) || proto.Empty() {
			return nil, malformed("bad ALPN entry")
		}
		out = append(out, string(proto))
	}
	return out, nil
}

// handshakeLen is the length of the handshake message whose first four
// bytes are hdr, checked against max.
func handshakeLen(hdr []byte, max int) (int, error) {
	if hdr[0] != handshakeClientHello {
		return 0, malformed(fmt.Sprintf("first handshake message is type %d, not ClientHello (1)", hdr[0]))
	}
	n := 4 + (int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3]))
	if n > max {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, max)
	}
	return n, nil
}
