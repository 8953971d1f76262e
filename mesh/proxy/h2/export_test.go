package h2

import "time"

// Held is how many connections the listener has accepted and holds: a
// test waits on it to know which process took a connection.
func (l *Listener) Held() int { return l.loop.Held() }

// SetPingTimeouts shortens the upstream health check for a test and
// returns the restore.
func SetPingTimeouts(send, wait time.Duration) func() {
	s, w := sendPingTimeout, pingTimeout
	sendPingTimeout, pingTimeout = send, wait
	return func() { sendPingTimeout, pingTimeout = s, w }
}
