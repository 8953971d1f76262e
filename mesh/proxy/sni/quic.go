package sni

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/quic-go/quic-go/quicvarint"
	"golang.org/x/crypto/cryptobyte"
)

// The QUIC versions whose Initial packets this package can open.
const (
	// Version1 is QUIC v1 (RFC 9000).
	Version1 uint32 = 0x00000001
	// Version2 is QUIC v2 (RFC 9369): v1's wire image with other salt,
	// labels and long-header type bits.
	Version2 uint32 = 0x6b3343cf
)

// Supported reports whether v is a version whose Initials can be opened.
func Supported(v uint32) bool { return v == Version1 || v == Version2 }

// MinInitialDatagram is the smallest UDP payload that may carry a client's
// Initial (RFC 9000 §14.1); a server discards smaller ones, and a Version
// Negotiation is sent only in reply to one this large (§6.1).
const MinInitialDatagram = 1200

// PacketType is a long-header packet's type, the same for every version.
type PacketType uint8

// Long-header packet types.
const (
	Initial PacketType = iota
	ZeroRTT
	Handshake
	Retry
	// VersionNegotiation is version 0's packet; it has no type bits.
	VersionNegotiation
)

// versionParams are what a version changes in the Initial's protection.
type versionParams struct {
	salt                     []byte
	keyLabel, ivLabel, hpLab string
	// types maps the two type bits to a PacketType.
	types [4]PacketType
}

var (
	paramsV1 = versionParams{
		salt:     mustHex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a"),
		keyLabel: "quic key", ivLabel: "quic iv", hpLab: "quic hp",
		types: [4]PacketType{Initial, ZeroRTT, Handshake, Retry},
	}
	paramsV2 = versionParams{
		salt:     mustHex("0dede3def700a6db819381be6e269dcbf9bd2ed9"),
		keyLabel: "quicv2 key", ivLabel: "quicv2 iv", hpLab: "quicv2 hp",
		types: [4]PacketType{Retry, Initial, ZeroRTT, Handshake},
	}
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func params(v uint32) *versionParams {
	switch v {
	case Version1:
		return &paramsV1
	case Version2:
		return &paramsV2
	}
	return nil
}

// Errors of the Initial inspector; each is wrapped with where it happened.
var (
	// ErrUnsupportedVersion: a long header of a version this package
	// cannot open (a Version Negotiation is the answer to it).
	ErrUnsupportedVersion = errors.New("unsupported QUIC version")
	// ErrShortHeader: a short-header packet; only an established flow's
	// connection ID can route it.
	ErrShortHeader = errors.New("short-header packet")
	// ErrNotInitial: a long header that is not an Initial.
	ErrNotInitial = errors.New("not an Initial packet")
	// ErrHeader: a long header that does not parse.
	ErrHeader = errors.New("malformed QUIC long header")
	// ErrDecrypt: the Initial's AEAD does not open: junk, a forged
	// Initial or one made for another connection ID.
	ErrDecrypt = errors.New("Initial packet does not decrypt")
	// ErrFrame: the decrypted payload holds a frame an Initial may not
	// carry, or a truncated one.
	ErrFrame = errors.New("bad frame in an Initial packet")
)

// IsLongHeader reports whether the packet starting with b0 has a long
// header (RFC 8999: the high bit, for every version).
func IsLongHeader(b0 byte) bool { return b0&0x80 != 0 }

// Header is a parsed long header. Its slices alias the datagram.
type Header struct {
	Version uint32
	// Type is meaningful only for a supported version or version 0.
	Type       PacketType
	DCID, SCID []byte
	// Token is an Initial's token.
	Token []byte
	// PNOffset is where the packet number begins (Initial, 0-RTT,
	// Handshake); zero otherwise.
	PNOffset int
	// Len is how many bytes of the datagram this packet takes: up to the
	// end of its Length field's extent, or the rest of the datagram for
	// Retry, Version Negotiation and unknown versions.
	Len int
}

// ParseLongHeader parses the long header at the start of b (RFC 8999's
// invariants for any version; RFC 9000 §17.2 for v1 and v2).
func ParseLongHeader(b []byte) (Header, error) {
	var h Header
	s := cryptobyte.String(b)
	var b0 uint8
	var dcid, scid cryptobyte.String
	if !s.ReadUint8(&b0) || !IsLongHeader(b0) {
		return h, ErrShortHeader
	}
	if !s.ReadUint32(&h.Version) || !s.ReadUint8LengthPrefixed(&dcid) || !s.ReadUint8LengthPrefixed(&scid) {
		return h, fmt.Errorf("%w: truncated before the connection IDs end", ErrHeader)
	}
	h.DCID, h.SCID = dcid, scid
	if h.Version == 0 {
		h.Type, h.Len = VersionNegotiation, len(b)
		return h, nil
	}
	p := params(h.Version)
	if p == nil {
		h.Len = len(b)
		return h, fmt.Errorf("%w: 0x%08x", ErrUnsupportedVersion, h.Version)
	}
	if len(dcid) > 20 || len(scid) > 20 {
		return h, fmt.Errorf("%w: connection ID of %d/%d bytes (max 20)", ErrHeader, len(dcid), len(scid))
	}
	if b0&0x40 == 0 {
		return h, fmt.Errorf("%w: fixed bit clear", ErrHeader)
	}
	h.Type = p.types[(b0>>4)&3]
	if h.Type == Retry {
		h.Len = len(b)
		return h, nil
	}
	if h.Type == Initial {
		tok, err := readVarint(&s)
		if err != nil || tok > uint64(len(s)) {
			return h, fmt.Errorf("%w: bad token length", ErrHeader)
		}
		h.Token = s[:tok]
		s = s[tok:]
	}
	length, err := readVarint(&s)
	if err != nil || length > uint64(len(s)) {
		return h, fmt.Errorf("%w: Length field %d exceeds the %d bytes left", ErrHeader, length, len(s))
	}
	h.PNOffset = len(b) - len(s)
	h.Len = h.PNOffset + int(length)
	return h, nil
}

func readVarint(s *cryptobyte.String) (uint64, error) {
	v, n, err := quicvarint.Parse(*s)
	if err != nil {
		return 0, err
	}
	*s = (*s)[n:]
	return v, nil
}

// initialKeys are one direction's Initial packet protection.
type initialKeys struct {
	aead cipher.AEAD
	iv   [12]byte
	hp   cipher.Block
}

// clientInitialKeys derives the client's Initial keys from the DCID of its
// first Initial (RFC 9001 §5.2; RFC 9369 §3.3.1 for v2).
func clientInitialKeys(version uint32, dcid []byte) (*initialKeys, error) {
	p := params(version)
	if p == nil {
		return nil, fmt.Errorf("%w: 0x%08x", ErrUnsupportedVersion, version)
	}
	secret, err := clientInitialKeysSecret(p, dcid)
	if err != nil {
		return nil, err
	}
	return keysFromSecret(p, secret)
}

// clientInitialKeysSecret is client_initial_secret.
func clientInitialKeysSecret(p *versionParams, dcid []byte) ([]byte, error) {
	initial, err := hkdf.Extract(sha256.New, dcid, p.salt)
	if err != nil {
		return nil, fmt.Errorf("initial secret: %w", err)
	}
	return expandLabel(initial, "client in", sha256.Size)
}

func keysFromSecret(p *versionParams, secret []byte) (*initialKeys, error) {
	key, err := expandLabel(secret, p.keyLabel, 16)
	if err != nil {
		return nil, err
	}
	iv, err := expandLabel(secret, p.ivLabel, 12)
	if err != nil {
		return nil, err
	}
	hpKey, err := expandLabel(secret, p.hpLab, 16)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("initial key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("initial AEAD: %w", err)
	}
	hp, err := aes.NewCipher(hpKey)
	if err != nil {
		return nil, fmt.Errorf("header protection key: %w", err)
	}
	k := &initialKeys{aead: aead, hp: hp}
	copy(k.iv[:], iv)
	return k, nil
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context
// (RFC 8446 §7.1), as QUIC uses it. The labels are few and fixed, so
// their HkdfLabel encodings are built once.
func expandLabel(secret []byte, label string, n int) ([]byte, error) {
	out, err := hkdf.Expand(sha256.New, secret, hkdfLabel(label, n), n)
	if err != nil {
		return nil, fmt.Errorf("HKDF-Expand-Label %q: %w", label, err)
	}
	return out, nil
}

// hkdfLabels are the HkdfLabel encodings of the few fixed labels.
var hkdfLabels = func() map[string]string {
	m := map[string]string{}
	for _, l := range []struct {
		label string
		n     int
	}{
		{"client in", sha256.Size},
		{paramsV1.keyLabel, 16}, {paramsV1.ivLabel, 12}, {paramsV1.hpLab, 16},
		{paramsV2.keyLabel, 16}, {paramsV2.ivLabel, 12}, {paramsV2.hpLab, 16},
	} {
		m[l.label] = encodeHKDFLabel(l.label, l.n)
	}
	return m
}()

func hkdfLabel(label string, n int) string {
	if info, ok := hkdfLabels[label]; ok && int(info[0])<<8|int(info[1]) == n {
		return info
	}
	return encodeHKDFLabel(label, n)
}

func encodeHKDFLabel(label string, n int) string {
	var b cryptobyte.Builder
	b.AddUint16(uint16(n))
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte("tls13 " + label)) })
	b.AddUint8LengthPrefixed(func(*cryptobyte.Builder) {})
	return string(b.BytesOrPanic())
}

// open removes header protection from the long-header packet p (which it
// modifies: pass a copy) and decrypts it, returning the packet number and
// the plaintext payload (aliasing p). largest is the largest packet number
// opened so far, -1 for none.
func (k *initialKeys) open(p []byte, pnOffset int, largest int64) (int64, []byte, error) {
	if len(p) < pnOffset+4+aes.BlockSize {
		return 0, nil, fmt.Errorf("%w: %d bytes leave no header protection sample", ErrDecrypt, len(p))
	}
	var mask [aes.BlockSize]byte
	k.hp.Encrypt(mask[:], p[pnOffset+4:pnOffset+4+aes.BlockSize])
	p[0] ^= mask[0] & 0x0f
	pnLen := int(p[0]&3) + 1
	var truncated uint64
	for i := range pnLen {
		p[pnOffset+i] ^= mask[1+i]
		truncated = truncated<<8 | uint64(p[pnOffset+i])
	}
	pn := decodePacketNumber(largest, truncated, pnLen*8)
	nonce := k.iv
	for i := range 8 {
		nonce[11-i] ^= byte(pn >> (8 * i))
	}
	hdrEnd := pnOffset + pnLen
	payload, err := k.aead.Open(p[hdrEnd:hdrEnd], nonce[:], p[hdrEnd:], p[:hdrEnd])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: packet number %d: %w", ErrDecrypt, pn, err)
	}
	if p[0]&0x0c != 0 {
		// Reserved bits set after removing protection: a
		// PROTOCOL_VIOLATION (RFC 9000 §17.2).
		return 0, nil, fmt.Errorf("%w: reserved bits 0x%x set", ErrHeader, p[0]&0x0c)
	}
	return pn, payload, nil
}

// decodePacketNumber is RFC 9000 Appendix A.3.
func decodePacketNumber(largest int64, truncated uint64, bits int) int64 {
	expected := largest + 1
	win := int64(1) << bits
	hwin := win / 2
	mask := win - 1
	candidate := (expected &^ mask) | int64(truncated)
	switch {
	case candidate <= expected-hwin && candidate < (1<<62)-win:
		return candidate + win
	case candidate > expected+hwin && candidate >= win:
		return candidate - win
	}
	return candidate
}

// Frame types an Initial packet may carry (RFC 9000 §12.4, Table 3).
const (
	framePadding       = 0x00
	framePing          = 0x01
	frameAck           = 0x02
	frameAckECN        = 0x03
	frameCrypto        = 0x06
	frameConnClose     = 0x1c
	maxCryptoOffset    = 1 << 62
	errTruncatedFrames = "truncated"
)

// cryptoFrames calls fn for each CRYPTO frame in an Initial's payload and
// skips the other frames an Initial may carry.
func cryptoFrames(payload []byte, fn func(off uint64, data []byte) error) error {
	s := cryptobyte.String(payload)
	for !s.Empty() {
		at := len(payload) - len(s)
		typ, err := readVarint(&s)
		if err != nil {
			return fmt.Errorf("%w: frame type at byte %d: %w", ErrFrame, at, err)
		}
		switch typ {
		case framePadding:
			// A run of PADDING fills most of an Initial: skip it whole.
			for len(s) > 0 && s[0] == framePadding {
				s = s[1:]
			}
		case framePing:
		case frameAck, frameAckECN:
			// Largest, delay, range count, first range; then count
			// (gap, length) pairs; then three ECN counts.
			var v [4]uint64
			for i := range v {
				if v[i], err = readVarint(&s); err != nil {
					return fmt.Errorf("%w: ACK at byte %d: %w", ErrFrame, at, err)
				}
			}
			n := 2 * v[2]
			if typ == frameAckECN {
				n += 3
			}
			if n > uint64(len(s)) {
				return fmt.Errorf("%w: ACK at byte %d claims %d ranges", ErrFrame, at, v[2])
			}
			for range n {
				if _, err = readVarint(&s); err != nil {
					return fmt.Errorf("%w: ACK at byte %d: %w", ErrFrame, at, err)
				}
			}
		case frameCrypto:
			off, err := readVarint(&s)
			if err != nil {
				return fmt.Errorf("%w: CRYPTO offset at byte %d: %w", ErrFrame, at, err)
			}
			n, err := readVarint(&s)
			if err != nil || n > uint64(len(s)) {
				return fmt.Errorf("%w: CRYPTO at byte %d: length exceeds the packet", ErrFrame, at)
			}
			if off+n > maxCryptoOffset {
				return fmt.Errorf("%w: CRYPTO at byte %d ends past 2^62", ErrFrame, at)
			}
			if err := fn(off, s[:n]); err != nil {
				return err
			}
			s = s[n:]
		case frameConnClose:
			var code, ftype, n uint64
			if code, err = readVarint(&s); err == nil {
				if ftype, err = readVarint(&s); err == nil {
					n, err = readVarint(&s)
				}
			}
			_, _ = code, ftype
			if err != nil || n > uint64(len(s)) {
				return fmt.Errorf("%w: CONNECTION_CLOSE at byte %d %s", ErrFrame, at, errTruncatedFrames)
			}
			s = s[n:]
		default:
			return fmt.Errorf("%w: frame type 0x%x at byte %d is not allowed in an Initial", ErrFrame, typ, at)
		}
	}
	return nil
}

// cryptoStream reassembles CRYPTO data by offset: fragments may come out
// of order (quic-go and Chrome scramble the ClientHello on purpose),
// twice, or overlapping. It holds at most max bytes.
type cryptoStream struct {
	buf []byte
	// spans are the received ranges, sorted and merged.
	spans [][2]int
	max   int
}

func (c *cryptoStream) insert(off uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if off+uint64(len(data)) > uint64(c.max) {
		return fmt.Errorf("%w: CRYPTO data up to byte %d, limit %d", ErrTooLarge, off+uint64(len(data)), c.max)
	}
	start, end := int(off), int(off)+len(data)
	if end > len(c.buf) {
		if end > cap(c.buf) {
			grown := make([]byte, end, min(max(2*cap(c.buf), end, 2048), c.max))
			copy(grown, c.buf)
			c.buf = grown
		}
		c.buf = c.buf[:end]
	}
	copy(c.buf[start:end], data)
	// Merge [start, end) into the sorted spans.
	out := c.spans[:0:0]
	placed := false
	for _, sp := range c.spans {
		switch {
		case sp[1] < start:
			out = append(out, sp)
		case sp[0] > end:
			if !placed {
				out = append(out, [2]int{start, end})
				placed = true
			}
			out = append(out, sp)
		default:
			start, end = min(start, sp[0]), max(end, sp[1])
		}
	}
	if !placed {
		out = append(out, [2]int{start, end})
	}
	c.spans = out
	return nil
}

// contiguous is how many bytes from offset 0 have arrived.
func (c *cryptoStream) contiguous() []byte {
	if len(c.spans) == 0 || c.spans[0][0] != 0 {
		return nil
	}
	return c.buf[:c.spans[0][1]]
}

// InitialReader reads a QUIC client's ClientHello from the Initial packets
// of one new connection, datagram by datagram. It is not safe for
// concurrent use.
type InitialReader struct {
	version uint32
	dcid    []byte
	keys    *initialKeys
	largest int64
	crypto  cryptoStream
	scratch []byte
	hello   *ClientHello
}

// NewInitialReader reads a ClientHello of at most max bytes (zero:
// DefaultMaxClientHello); what it buffers is bounded by max.
func NewInitialReader(max int) *InitialReader {
	if max <= 0 {
		max = DefaultMaxClientHello
	}
	return &InitialReader{largest: -1, crypto: cryptoStream{max: max}}
}

// Version and DCID are those of the connection's first Initial.
func (r *InitialReader) Version() uint32 { return r.version }
func (r *InitialReader) DCID() []byte    { return r.dcid }

// Read takes one datagram from the client: each coalesced long-header
// packet in it is parsed, Initials are opened and their CRYPTO frames
// reassembled; 0-RTT and Handshake packets are stepped over; a short
// header ends the datagram. It reports the ClientHello once it is whole.
// The datagram is not modified. An error says the datagram held no
// Initial that opened (the first error met); a later packet that fails
// after one that opened is ignored, as RFC 9000 §12.2 lets a receiver
// do.
func (r *InitialReader) Read(datagram []byte) (ClientHello, bool, error) {
	if r.hello != nil {
		return *r.hello, true, nil
	}
	opened := false
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	for b, at := datagram, 0; len(b) > 0; {
		h, err := ParseLongHeader(b)
		if err != nil {
			fail(fmt.Errorf("packet at byte %d: %w", at, err))
			break
		}
		if h.Type != Initial || h.Version == 0 {
			if h.Version == 0 || h.Type == Retry {
				fail(fmt.Errorf("packet at byte %d: %w", at, ErrNotInitial))
				break
			}
			if !opened {
				fail(fmt.Errorf("packet at byte %d: %w", at, ErrNotInitial))
			}
			b, at = b[h.Len:], at+h.Len
			continue
		}
		if err := r.openInitial(b[:h.Len], h); err != nil {
			fail(fmt.Errorf("Initial at byte %d: %w", at, err))
		} else {
			opened = true
		}
		b, at = b[h.Len:], at+h.Len
	}
	if !opened {
		if first == nil {
			first = fmt.Errorf("%w: empty datagram", ErrHeader)
		}
		return ClientHello{}, false, first
	}
	msg := r.crypto.contiguous()
	if len(msg) < 4 {
		return ClientHello{}, false, nil
	}
	n, err := handshakeLen(msg, r.crypto.max)
	if err != nil {
		return ClientHello{}, false, err
	}
	if len(msg) < n {
		return ClientHello{}, false, nil
	}
	hello, err := ParseClientHello(msg[:n])
	if err != nil {
		return ClientHello{}, false, err
	}
	r.hello = &hello
	r.crypto = cryptoStream{max: r.crypto.max} // the bytes are no longer needed
	r.scratch = nil
	return hello, true, nil
}

func (r *InitialReader) openInitial(p []byte, h Header) error {
	if r.keys == nil {
		keys, err := clientInitialKeys(h.Version, h.DCID)
		if err != nil {
			return err
		}
		r.keys, r.version, r.dcid = keys, h.Version, bytes.Clone(h.DCID)
	} else if h.Version != r.version || !bytes.Equal(h.DCID, r.dcid) {
		return fmt.Errorf("%w: version 0x%08x DCID %x, the connection began with 0x%08x DCID %x",
			ErrDecrypt, h.Version, h.DCID, r.version, r.dcid)
	}
	r.scratch = append(r.scratch[:0], p...)
	pn, payload, err := r.keys.open(r.scratch, h.PNOffset, r.largest)
	if err != nil {
		return err
	}
	if err := cryptoFrames(payload, r.crypto.insert); err != nil {
		return err
	}
	r.largest = max(r.largest, pn)
	return nil
}

// AppendVersionNegotiation appends a Version Negotiation packet answering
// a long header with dcid and scid (RFC 9000 §17.2.1: the connection IDs
// swapped), offering versions. unused is the packet's first byte's seven
// free bits.
func AppendVersionNegotiation(b []byte, unused byte, dcid, scid []byte, versions ...uint32) []byte {
	b = append(b, 0x80|unused)
	b = append(b, 0, 0, 0, 0)
	b = append(b, byte(len(scid)))
	b = append(b, scid...)
	b = append(b, byte(len(dcid)))
	b = append(b, dcid...)
	for _, v := range versions {
		b = append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return b
}

// AppendClientInitial appends a client Initial packet of version carrying
// payload (frames, in the clear) under the Initial keys of dcid, with a
// four-byte packet number pn. A forwarder never seals anything; this is
// for tests and load generators that must forge what a client sends.
func AppendClientInitial(b []byte, version uint32, dcid, scid []byte, pn uint32, payload []byte) ([]byte, error) {
	p := params(version)
	if p == nil {
		return b, fmt.Errorf("%w: 0x%08x", ErrUnsupportedVersion, version)
	}
	keys, err := clientInitialKeys(version, dcid)
	if err != nil {
		return b, err
	}
	var typeBits byte
	for i, t := range p.types {
		if t == Initial {
			typeBits = byte(i)
		}
	}
	start := len(b)
	b = append(b, 0xc0|typeBits<<4|3)
	b = append(b, byte(version>>24), byte(version>>16), byte(version>>8), byte(version))
	b = append(b, byte(len(dcid)))
	b = append(b, dcid...)
	b = append(b, byte(len(scid)))
	b = append(b, scid...)
	b = append(b, 0) // no token
	b = quicvarint.AppendWithLen(b, uint64(4+len(payload)+16), 2)
	pnOffset := len(b) - start
	b = append(b, byte(pn>>24), byte(pn>>16), byte(pn>>8), byte(pn))
	nonce := keys.iv
	for i := range 8 {
		nonce[11-i] ^= byte(uint64(pn) >> (8 * i))
	}
	pkt := b[start:]
	b = keys.aead.Seal(b, nonce[:], payload, pkt)
	pkt = b[start:]
	if len(pkt) < pnOffset+4+aes.BlockSize {
		return b[:start], fmt.Errorf("payload of %d bytes is too short to sample", len(payload))
	}
	var mask [aes.BlockSize]byte
	keys.hp.Encrypt(mask[:], pkt[pnOffset+4:pnOffset+4+aes.BlockSize])
	pkt[0] ^= mask[0] & 0x0f
	for i := range 4 {
		pkt[pnOffset+i] ^= mask[1+i]
	}
	return b, nil
}

// AppendCryptoFrame appends a CRYPTO frame.
func AppendCryptoFrame(b []byte, off uint64, data []byte) []byte {
	b = append(b, frameCrypto)
	b = quicvarint.Append(b, off)
	b = quicvarint.Append(b, uint64(len(data)))
	return append(b, data...)
}
