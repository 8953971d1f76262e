package main

import (
	"strings"
	"testing"
)

// --mark is applied to sockets in the node netns, so a value the node's
// own rules match is refused, naming the rule; 0 (none) and a value clear
// of every node mark are accepted.
func TestParseMark(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
		err  string
	}{
		{"0", 0, ""},
		{"0x1", 1, ""},
		{"0xae7e", 0, "kube-proxy KUBE-FIREWALL drop"},
		{"0x4000", 0, "KUBE-POSTROUTING masquerade"},
		{"mark", 0, `invalid --mark "mark"`},
		{"0x100000000", 0, "out of range"},
	} {
		got, err := parseMark(c.in)
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("parseMark(%q) = %#x, %v; want %#x", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("parseMark(%q) = %#x, %v; want an error containing %q", c.in, got, err, c.err)
		}
	}
}
