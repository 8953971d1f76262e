package sni_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
	"github.com/aether-mesh/aether/mesh/proxy/sni/snitest"
)

// quicGoInitials are the datagrams a quic-go client sends first to a
// server that never answers, until they hold its whole ClientHello.
func quicGoInitials(t *testing.T, version quic.Version, serverName string) [][]byte {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go quic.DialAddr(ctx, pc.LocalAddr().String(),
		&tls.Config{ServerName: serverName, NextProtos: []string{"h3"}, InsecureSkipVerify: true},
		&quic.Config{Versions: []quic.Version{version}})
	var out [][]byte
	r := sni.NewInitialReader(0)
	buf := make([]byte, 65536)
	// The deadline only bounds a broken run; the assertions are below.
	pc.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		n, _, err := pc.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(out), err)
		}
		d := bytes.Clone(buf[:n])
		out = append(out, d)
		if _, done, err := r.Read(d); err != nil {
			t.Fatalf("datagram %d: %v", len(out), err)
		} else if done {
			return out
		}
	}
}

// TestQUICGoInitials reads the SNI and ALPN from a real quic-go client's
// Initials (Go's default X25519MLKEM768 key share: the ClientHello spans
// two packets, its CRYPTO frames scrambled out of order by quic-go), in
// order, reversed and with every datagram twice.
func TestQUICGoInitials(t *testing.T) {
	for _, v := range []quic.Version{quic.Version1, quic.Version2} {
		t.Run(v.String(), func(t *testing.T) {
			dgs := quicGoInitials(t, v, "echo.ns2.svc.cluster.local")
			if len(dgs) < 2 {
				t.Fatalf("ClientHello fit in %d datagram: the two-packet case is not exercised", len(dgs))
			}
			for _, d := range dgs {
				if len(d) < sni.MinInitialDatagram {
					t.Errorf("quic-go sent a %d-byte Initial datagram", len(d))
				}
			}
			for name, order := range map[string][]int{
				"in order": {0, 1},
				"reversed": {1, 0},
				"twice":    {1, 1, 0, 0},
			} {
				r := sni.NewInitialReader(0)
				var hello sni.ClientHello
				done := false
				for i, k := range order {
					h, ok, err := r.Read(dgs[k])
					if err != nil {
						t.Fatalf("%s: datagram %d: %v", name, k, err)
					}
					if ok && i < len(order)-1 && name != "twice" {
						t.Fatalf("%s: ClientHello whole after datagram %d alone", name, k)
					}
					hello, done = h, ok
				}
				if !done || hello.ServerName != "echo.ns2.svc.cluster.local" || len(hello.ALPN) != 1 || hello.ALPN[0] != "h3" {
					t.Errorf("%s: done %v, %+v", name, done, hello)
				}
			}
			if r := sni.NewInitialReader(0); r.Version() != 0 {
				t.Fatal("fresh reader has a version")
			}
		})
	}
}

// TestInitialReaderFragments drives the reassembly with forged Initials:
// small CRYPTO chunks out of order, a duplicate, and coalesced packets.
func TestInitialReaderFragments(t *testing.T) {
	hello, err := snitest.QUICClientHello("b.example", "h3")
	if err != nil {
		t.Fatal(err)
	}
	if len(hello) <= 1200 {
		t.Fatalf("ClientHello of %d bytes: no post-quantum key share?", len(hello))
	}
	n := (len(hello) + 299) / 300
	order := []int{n - 1}
	for i := n - 2; i >= 0; i-- {
		order = append(order, i, i+1) // every chunk but the first twice
	}
	_, dgs, err := snitest.Initials(sni.Version1, hello, 300, order...)
	if err != nil {
		t.Fatal(err)
	}
	r := sni.NewInitialReader(0)
	for i, d := range dgs {
		h, done, err := r.Read(d)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if done != (i >= len(dgs)-2) {
			t.Fatalf("after datagram %d of %d: done = %v", i, len(dgs), done)
		}
		if done && h.ServerName != "b.example" {
			t.Fatalf("ServerName = %q", h.ServerName)
		}
	}

	// Coalesced: three Initials in one datagram, then a 0-RTT-looking
	// long header and a short header, which are stepped over.
	dcid, parts, err := snitest.Initials(sni.Version1, hello, 700)
	if err != nil {
		t.Fatal(err)
	}
	_ = dcid
	var one []byte
	for _, p := range parts {
		one = append(one, p...)
	}
	zeroRTT := []byte{0xd0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0x40, 5, 1, 2, 3, 4, 5}
	one = append(one, zeroRTT...)
	one = append(one, 0x40, 9, 9, 9)
	if h, done, err := sni.NewInitialReader(0).Read(one); err != nil || !done || h.ServerName != "b.example" {
		t.Fatalf("coalesced: %+v %v %v", h, done, err)
	}
}

func TestInitialReaderRefusals(t *testing.T) {
	hello, err := snitest.QUICClientHello("c.example")
	if err != nil {
		t.Fatal(err)
	}
	_, dgs, err := snitest.Initials(sni.Version1, hello, 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := snitest.Initials(sni.Version1, hello, 1000)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0xc3, 0, 0, 0, 1}, 300)
	junk[5] = 8
	for _, tc := range []struct {
		name string
		dgs  [][]byte
		want error
	}{
		{"short header", [][]byte{{0x41, 1, 2, 3, 4, 5}}, sni.ErrShortHeader},
		{"plaintext", [][]byte{[]byte("hello world")}, sni.ErrShortHeader},
		{"unknown version", [][]byte{{0xc0, 0xfa, 0xce, 0xb0, 0x0c, 0, 0}}, sni.ErrUnsupportedVersion},
		{"forged ciphertext", [][]byte{junk}, sni.ErrDecrypt},
		{"another connection's DCID", [][]byte{dgs[0], other[1]}, sni.ErrDecrypt},
		{"too large", nil, sni.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sni.NewInitialReader(0)
			if tc.dgs == nil {
				r = sni.NewInitialReader(1024)
				tc.dgs = dgs
			}
			var err error
			for _, d := range tc.dgs {
				if _, _, err = r.Read(d); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzInitial feeds the Initial reader arbitrary datagrams (header
// parsing, header protection, AEAD refusal), and arbitrary plaintext
// sealed into valid Initials (frame parsing, reassembly and the
// ClientHello parser behind them, which random ciphertext never reaches).
func FuzzInitial(f *testing.F) {
	hello, err := snitest.QUICClientHello("fuzz.example", "h3")
	if err != nil {
		f.Fatal(err)
	}
	_, dgs, err := snitest.Initials(sni.Version1, hello, 1100)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dgs[0], sni.AppendCryptoFrame(nil, 0, hello[:600]), sni.AppendCryptoFrame(nil, 600, hello[600:]))
	f.Add(dgs[1], sni.AppendCryptoFrame([]byte{2, 5, 0, 0, 0, 1}, 5, hello[5:]), sni.AppendCryptoFrame([]byte{0, 0, 1}, 0, hello[:5]))
	f.Add([]byte{0xc0, 0, 0, 0, 1, 0, 0, 0, 0}, []byte{3, 1, 1, 0, 0, 1, 2, 3}, []byte{0x1c, 0, 0, 0})
	f.Add([]byte("GET /"), []byte{6, 0x80, 0, 0, 0, 1, 1}, []byte{6, 0, 4, 1, 0, 0, 0})
	dcid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	f.Fuzz(func(t *testing.T, raw, p1, p2 []byte) {
		if _, done, err := sni.NewInitialReader(4096).Read(raw); done && err != nil {
			t.Fatalf("done with an error: %v", err)
		}
		r := sni.NewInitialReader(4096)
		for i, p := range [][]byte{p1, p2} {
			d, err := snitest.Pad(sni.Version1, dcid, nil, uint32(i), p)
			if err != nil {
				return
			}
			orig := bytes.Clone(d)
			h, done, err := r.Read(d)
			if !bytes.Equal(d, orig) {
				t.Fatal("Read modified the datagram")
			}
			if done && err == nil && len(h.ServerName) > 253 {
				t.Fatalf("server name of %d bytes", len(h.ServerName))
			}
		}
	})
}
