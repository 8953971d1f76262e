package sni

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rfcDCID is the client's DCID of RFC 9001 Appendix A (and RFC 9369's).
const rfcDCID = "8394c8f03e515708"

// TestInitialKeysRFC9001 checks the key derivation against RFC 9001
// Appendix A.1 and RFC 9369 Appendix A.1.
func TestInitialKeysRFC9001(t *testing.T) {
	for _, tc := range []struct {
		name            string
		version         uint32
		secret, key, iv string
		hp              string
	}{
		{"v1", Version1, "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea",
			"1f369613dd76d5467730efcbe3b1a22d", "fa044b2f42a3fd3b46fb255c", "9f50449e04a0e810283a1e9933adedd2"},
		{"v2", Version2, "14ec9d6eb9fd7af83bf5a668bc17a7e283766aade7ecd0891f70f9ff7f4bf47b",
			"8b1a0bc121284290a29e0971b5cd045d", "91f73e2351d8fa91660e909f", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params(tc.version)
			initial := unhex(t, rfcDCID)
			keys, err := clientInitialKeys(tc.version, initial)
			if err != nil {
				t.Fatal(err)
			}
			_ = keys
			// Recompute each step to compare it with the RFC's.
			secret := deriveClientSecret(t, p, initial)
			if got := hex.EncodeToString(secret); got != tc.secret {
				t.Errorf("client_initial_secret = %s, RFC says %s", got, tc.secret)
			}
			for _, step := range []struct {
				label, want string
				n           int
			}{{p.keyLabel, tc.key, 16}, {p.ivLabel, tc.iv, 12}, {p.hpLab, tc.hp, 16}} {
				if step.want == "" {
					continue
				}
				got, err := expandLabel(secret, step.label, step.n)
				if err != nil {
					t.Fatal(err)
				}
				if hex.EncodeToString(got) != step.want {
					t.Errorf("%q = %x, RFC says %s", step.label, got, step.want)
				}
			}
			if !bytes.Equal(keys.iv[:], unhex(t, tc.iv)) {
				t.Errorf("keys.iv = %x, RFC says %s", keys.iv, tc.iv)
			}
		})
	}
}

func deriveClientSecret(t *testing.T, p *versionParams, dcid []byte) []byte {
	t.Helper()
	k, err := clientInitialKeysSecret(p, dcid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOpenRFC9001Initial opens the protected client Initial of RFC 9001
// Appendix A.2 (and RFC 9369 A.2): header protection off, AES-128-GCM
// open, CRYPTO frame read, ClientHello parsed.
func TestOpenRFC9001Initial(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint32
		packet  string
	}{
		{"v1", Version1, rfcPacketV1},
		{"v2", Version2, rfcPacketV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := unhex(t, tc.packet)
			if len(pkt) != 1200 {
				t.Fatalf("vector is %d bytes, want 1200", len(pkt))
			}
			orig := bytes.Clone(pkt)
			r := NewInitialReader(0)
			hello, done, err := r.Read(pkt)
			if err != nil || !done {
				t.Fatalf("Read = done %v, %v", done, err)
			}
			if !bytes.Equal(pkt, orig) {
				t.Error("Read modified the datagram")
			}
			if hello.ServerName != "example.com" {
				t.Errorf("ServerName = %q, want example.com", hello.ServerName)
			}
			if len(hello.ALPN) != 1 || hello.ALPN[0] != "alpn" {
				t.Errorf("ALPN = %q, want [alpn]", hello.ALPN)
			}
			if r.Version() != tc.version || hex.EncodeToString(r.DCID()) != rfcDCID {
				t.Errorf("version 0x%x DCID %x", r.Version(), r.DCID())
			}
			// One flipped ciphertext bit fails the AEAD.
			bad := bytes.Clone(orig)
			bad[100] ^= 1
			if _, _, err := NewInitialReader(0).Read(bad); !errors.Is(err, ErrDecrypt) {
				t.Errorf("tampered packet: err = %v, want ErrDecrypt", err)
			}
		})
	}
}

// TestSealOpenRoundTrip checks AppendClientInitial against the RFC packet:
// sealing the RFC's plaintext with packet number 2 gives the RFC's bytes.
func TestSealRFC9001Initial(t *testing.T) {
	payload := unhex(t, rfcCryptoFrame)
	payload = append(payload, make([]byte, 1162-len(payload))...)
	// The RFC's header uses a 4-byte packet number and a 2-byte Length:
	// what AppendClientInitial writes.
	got, err := AppendClientInitial(nil, Version1, unhex(t, rfcDCID), nil, 2, payload)
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, rfcPacketV1); !bytes.Equal(got, want) {
		t.Errorf("sealed RFC plaintext differs from RFC 9001 A.2:\n got %x\nwant %x", got[:40], want[:40])
	}
}

func TestCryptoStreamReassembly(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	c := cryptoStream{max: 64}
	for _, f := range [][2]int{{10, 15}, {0, 4}, {12, 20}, {0, 4}, {3, 11}} {
		if err := c.insert(uint64(f[0]), data[f[0]:f[1]]); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(c.contiguous()); got != string(data) {
		t.Errorf("contiguous = %q, want %q (spans %v)", got, data, c.spans)
	}
	if len(c.spans) != 1 {
		t.Errorf("spans = %v, want one", c.spans)
	}
	// A gap holds the prefix back.
	g := cryptoStream{max: 64}
	_ = g.insert(5, data[5:9])
	if g.contiguous() != nil {
		t.Error("contiguous with offset 0 missing")
	}
	if err := g.insert(60, data[:5]); !errors.Is(err, ErrTooLarge) {
		t.Errorf("insert past max: %v, want ErrTooLarge", err)
	}
}

func TestDecodePacketNumber(t *testing.T) {
	// RFC 9000 A.3's example.
	if got := decodePacketNumber(0xa82f30ea, 0x9b32, 16); got != 0xa82f9b32 {
		t.Errorf("got 0x%x, want 0xa82f9b32", got)
	}
	if got := decodePacketNumber(-1, 2, 32); got != 2 {
		t.Errorf("first packet: got %d, want 2", got)
	}
}

func TestParseLongHeaderRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", []byte{0x40, 1, 2, 3}, ErrShortHeader},
		{"truncated", []byte{0xc0, 0, 0, 0, 1, 8, 1}, ErrHeader},
		{"unknown version", []byte{0xc0, 0x0a, 0x0a, 0x0a, 0x0a, 0, 0}, ErrUnsupportedVersion},
		{"long cid", append([]byte{0xc0, 0, 0, 0, 1, 21}, make([]byte, 30)...), ErrHeader},
		{"fixed bit", []byte{0x80, 0, 0, 0, 1, 0, 0, 0, 1, 0}, ErrHeader},
		{"length past end", []byte{0xc0, 0, 0, 0, 1, 0, 0, 0, 0x40, 0x50, 1}, ErrHeader},
	} {
		if _, err := ParseLongHeader(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	vn := AppendVersionNegotiation(nil, 0x1a, []byte{1, 2}, []byte{3}, Version1, Version2)
	h, err := ParseLongHeader(vn)
	if err != nil || h.Type != VersionNegotiation || !bytes.Equal(h.DCID, []byte{3}) || !bytes.Equal(h.SCID, []byte{1, 2}) {
		t.Errorf("VN parsed as %+v, %v", h, err)
	}
}

// rfcCryptoFrame is RFC 9001 A.2's CRYPTO frame (the ClientHello).
const rfcCryptoFrame = `060040f1010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c000004130113
02010000c000000010000e00000b6578616d706c652e636f6dff01000100000a0008000600
1d0017001800100007000504616c706e000500050100000000003300260024001d00209370
b2c9caa47fbabaf4559fedba753de171fa71f50f1ce15d43e994ec74d748002b0003020304
000d0010000e0403050306030203080408050806002d00020101001c00024001003900320408
ffffffffffffffff05048000ffff07048000ffff0801100104800075300901100f088394c8
f03e51570806048000ffff`
