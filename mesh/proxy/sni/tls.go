package sni

import (
	"errors"
	"fmt"
	"io"
)

// TLS record constants.
const (
	recordHandshake = 22
	recordHeaderLen = 5
	// maxPlaintext is the largest TLSPlaintext fragment (RFC 8446 §5.1).
	maxPlaintext = 1 << 14
)

// ErrNotTLS: the stream's first byte is not a TLS handshake record.
// tls_inspector calls this tls_not_found and lets the connection go on
// with no server name, to a filter chain that names none.
var ErrNotTLS = errors.New("not a TLS handshake")

// ReadClientHello reads TLS records from r until it holds a whole
// ClientHello, which may span several records and each record several
// reads (segments). It returns every byte it read, for the caller to
// replay upstream, with or without an error.
//
// Envoy's tls_inspector semantics: a first byte other than a handshake
// record is ErrNotTLS; a ClientHello that cannot be parsed wraps
// ErrMalformed (tls_inspector, by default, treats both as plaintext: no
// SNI); more than max bytes read before the ClientHello is whole is
// ErrTooLarge (client_hello_too_large: the connection is closed). A slow
// client is the caller's to bound, with a read deadline on r
// (listener_filters_timeout); the deadline's error comes back as is.
func ReadClientHello(r io.Reader, max int) (ClientHello, []byte, error) {
	if max <= 0 {
		max = DefaultMaxClientHello
	}
	rd := reader{r: r, max: max}
	var msg []byte
	msgLen := -1
	// start is where the next record begins; the buffer may hold more.
	for start := 0; msgLen < 0 || len(msg) < msgLen; {
		if err := rd.need(start + recordHeaderLen); err != nil {
			if start == 0 && len(rd.buf) > 0 && rd.buf[0] != recordHandshake {
				return ClientHello{}, rd.buf, ErrNotTLS
			}
			return ClientHello{}, rd.buf, err
		}
		hdr := rd.buf[start : start+recordHeaderLen]
		if hdr[0] != recordHandshake {
			if start == 0 {
				return ClientHello{}, rd.buf, ErrNotTLS
			}
			return ClientHello{}, rd.buf, malformed(fmt.Sprintf("record type %d at byte %d inside the ClientHello", hdr[0], start))
		}
		if hdr[1] != 3 {
			return ClientHello{}, rd.buf, malformed(fmt.Sprintf("record version %d.%d at byte %d", hdr[1], hdr[2], start))
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > maxPlaintext {
			return ClientHello{}, rd.buf, malformed(fmt.Sprintf("record length %d at byte %d", n, start))
		}
		if err := rd.need(start + recordHeaderLen + n); err != nil {
			return ClientHello{}, rd.buf, err
		}
		msg = append(msg, rd.buf[start+recordHeaderLen:start+recordHeaderLen+n]...)
		start += recordHeaderLen + n
		if msgLen < 0 && len(msg) >= 4 {
			var err error
			if msgLen, err = handshakeLen(msg, max); err != nil {
				return ClientHello{}, rd.buf, err
			}
		}
	}
	if len(msg) > msgLen {
		// A second handshake message coalesced into the ClientHello's
		// last record: a client sends nothing before the server's reply.
		return ClientHello{}, rd.buf, malformed(fmt.Sprintf("%d bytes after the ClientHello in its record", len(msg)-msgLen))
	}
	hello, err := ParseClientHello(msg)
	return hello, rd.buf, err
}

// reader keeps every byte read from r, up to max.
type reader struct {
	r   io.Reader
	buf []byte
	max int
}

// need reads until buf holds n bytes; more than max is ErrTooLarge.
func (rd *reader) need(n int) error {
	if n > rd.max {
		return fmt.Errorf("%w: %d bytes needed, limit %d", ErrTooLarge, n, rd.max)
	}
	for len(rd.buf) < n {
		if cap(rd.buf) < n {
			grown := make([]byte, len(rd.buf), min(max(2*cap(rd.buf), n, 512), rd.max))
			copy(grown, rd.buf)
			rd.buf = grown
		}
		m, err := rd.r.Read(rd.buf[len(rd.buf):cap(rd.buf)])
		rd.buf = rd.buf[:len(rd.buf)+m]
		if len(rd.buf) > 0 && rd.buf[0] != recordHandshake {
			return ErrNotTLS
		}
		if err != nil && len(rd.buf) < n {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("stream ended after %d bytes of the ClientHello: %w", len(rd.buf), io.ErrUnexpectedEOF)
			}
			return err
		}
	}
	return nil
}
