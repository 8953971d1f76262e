package h2

// Held is how many connections the listener has accepted and holds: a
// test waits on it to know which process took a connection.
func (l *Listener) Held() int { return l.loop.Held() }
