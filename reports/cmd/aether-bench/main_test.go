package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestScaleFlagsAreCheckedBeforeAnythingRuns(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-scale-rates", "250,500"}, "rate 250 (point 1 of the rate sweep) is not a positive multiple of its 4 connections"},
		{[]string{"-scale-conns", "1,x"}, `-scale-conns: item 2, "x", is not a whole number`},
		{[]string{"-scale-point", "2500ms"}, "2.5s a point"},
		{[]string{"-scale-conns", "16,4"}, "do not rise at point 2"},
	} {
		var out, errb bytes.Buffer
		if rc := runArgs(c.args, &out, &errb); rc != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, rc, errb.String())
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: stderr %q lacks %q", c.args, errb.String(), c.want)
		}
	}
}
