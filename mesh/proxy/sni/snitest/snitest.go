// Package snitest makes the ClientHellos and QUIC Initials the sni and
// passthrough tests feed their parsers: real ones, from crypto/tls, so a
// parser is tested against what a Go client sends.
package snitest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
)

// QUICClientHello is the ClientHello handshake message crypto/tls's QUIC
// client sends for serverName and alpn, with its default key shares
// (X25519MLKEM768 first: about 1.6 KB).
func QUICClientHello(serverName string, alpn ...string) ([]byte, error) {
	c := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{
		ServerName: serverName, NextProtos: alpn, MinVersion: tls.VersionTLS13,
	}})
	defer c.Close()
	c.SetTransportParameters([]byte{0x01, 0x01, 0x00})
	if err := c.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("start TLS QUIC client: %w", err)
	}
	var hello []byte
	for {
		ev := c.NextEvent()
		switch ev.Kind {
		case tls.QUICNoEvent:
			if hello == nil {
				return nil, fmt.Errorf("TLS QUIC client wrote no ClientHello")
			}
			return hello, nil
		case tls.QUICWriteData:
			if ev.Level == tls.QUICEncryptionLevelInitial {
				hello = append(hello, ev.Data...)
			}
		}
	}
}

// TLSClientHello is every byte a crypto/tls client writes before it waits
// for the server: its ClientHello in TLS records.
func TLSClientHello(serverName string, alpn ...string) ([]byte, error) {
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		tc := tls.Client(client, &tls.Config{ServerName: serverName, NextProtos: alpn, InsecureSkipVerify: true})
		_ = tc.Handshake()
		tc.Close()
	}()
	// The ClientHello is one write; read it whole.
	buf := make([]byte, 64<<10)
	var out []byte
	for {
		n, err := server.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return nil, fmt.Errorf("read ClientHello: %w", err)
		}
		if len(out) >= 5 && len(out) >= 5+int(out[3])<<8|int(out[4]) {
			return out, nil
		}
	}
}

// Initials packs hello into client Initial datagrams of version under a
// random 8-byte DCID, chunk bytes of CRYPTO data per packet, each padded
// to sni.MinInitialDatagram. order, if given, is the order the chunks are
// sent in (indexes); the DCID is returned with the datagrams.
func Initials(version uint32, hello []byte, chunk int, order ...int) ([]byte, [][]byte, error) {
	dcid := make([]byte, 8)
	rand.Read(dcid)
	scid := make([]byte, 4)
	rand.Read(scid)
	var chunks [][2]int
	for off := 0; off < len(hello); off += chunk {
		chunks = append(chunks, [2]int{off, min(off+chunk, len(hello))})
	}
	if order == nil {
		for i := range chunks {
			order = append(order, i)
		}
	}
	var out [][]byte
	for pn, i := range order {
		if i >= len(chunks) {
			return nil, nil, fmt.Errorf("chunk %d of %d", i, len(chunks))
		}
		c := chunks[i]
		payload := sni.AppendCryptoFrame(nil, uint64(c[0]), hello[c[0]:c[1]])
		d, err := Pad(version, dcid, scid, uint32(pn), payload)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, d)
	}
	return dcid, out, nil
}

// Pad seals payload into one Initial padded to sni.MinInitialDatagram.
func Pad(version uint32, dcid, scid []byte, pn uint32, payload []byte) ([]byte, error) {
	// Header: 1 + 4 + 1+len(dcid) + 1+len(scid) + 1 (token) + 2 (length)
	// + 4 (pn), then payload and the 16-byte tag.
	overhead := 14 + len(dcid) + len(scid) + 16
	if pad := sni.MinInitialDatagram - overhead - len(payload); pad > 0 {
		payload = append(payload, make([]byte, pad)...)
	}
	return sni.AppendClientInitial(nil, version, dcid, scid, pn, payload)
}
