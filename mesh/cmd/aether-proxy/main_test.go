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

// Hot restart flags are checked before anything starts, and a process
// whose parent epoch does not run fails naming the socket and both epochs.
func TestRestartFlags(t *testing.T) {
	sock := t.TempDir() + "/hr"
	base := []string{"--node", "n", "--xds", "unix:///nonexistent", "--metrics-addr", "127.0.0.1:0", "--socket-path", sock}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--restart-epoch", "1", "--disable-hot-restart"}, "--restart-epoch 1 needs hot restart"},
		{[]string{"--drain-time", "3s", "--parent-shutdown-time", "2s"}, "--drain-time 3s exceeds --parent-shutdown-time 2s"},
		{[]string{"--drain-time", "0s"}, "--drain-time 0s: must be positive"},
		{[]string{"--parent-shutdown-time", "-1s"}, "--parent-shutdown-time -1s: must be positive"},
		{[]string{"--restart-epoch", "-1"}, `invalid value "-1" for flag -restart-epoch: want a whole number from 0 to 4294967295`},
		{[]string{"--restart-epoch", "1x"}, `invalid value "1x" for flag -restart-epoch: want a whole number`},
		{[]string{"--base-id", "-3"}, `invalid value "-3" for flag -base-id: want a whole number`},
		{[]string{"--restart-epoch", "x"}, `invalid value "x" for flag -restart-epoch`},
		{[]string{"--concurrency", "-1"}, "invalid --concurrency -1: must be 0 (one per core) or more"},
		{[]string{"--concurrency", "two"}, `invalid value "two" for flag -concurrency`},
		{[]string{"--restart-epoch", "2", "--base-id", "1"}, "hot restart epoch 2: no parent (epoch 1) serves " + sock + "_parent_11"},
	} {
		err := run(append(append([]string{}, base...), c.args...))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("run %v: %v; want an error containing %q", c.args, err, c.err)
		}
	}
}
