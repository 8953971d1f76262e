package udp

import "sync"

// maxReplyBufs bounds the reply buffers out at once across every session
// in the process: 256 of maxDatagram bytes is 16 MiB. A burst of sessions
// receiving at the same moment (a spray's replies) waits for buffers
// instead of growing memory with the number of sessions.
const maxReplyBufs = 256

// bufPool lends maxDatagram-byte buffers, at most its capacity at once. A
// session takes buffers only while it moves a burst of replies, never
// while it waits for one, so memory follows the traffic in flight.
type bufPool struct {
	slots chan struct{}
	bufs  sync.Pool
}

func newBufPool(capacity int) *bufPool {
	return &bufPool{
		slots: make(chan struct{}, capacity),
		bufs:  sync.Pool{New: func() any { b := make([]byte, maxDatagram); return &b }},
	}
}

// get waits for a buffer. Only a caller holding none may wait: one that
// already holds some uses tryGet, so holders never wait on each other.
func (p *bufPool) get() *[]byte {
	p.slots <- struct{}{}
	return p.bufs.Get().(*[]byte)
}

// tryGet lends a buffer if one is free.
func (p *bufPool) tryGet() (*[]byte, bool) {
	select {
	case p.slots <- struct{}{}:
		return p.bufs.Get().(*[]byte), true
	default:
		return nil, false
	}
}

func (p *bufPool) put(b *[]byte) {
	p.bufs.Put(b)
	<-p.slots
}

var replyBufs = newBufPool(maxReplyBufs)
