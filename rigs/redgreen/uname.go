package redgreen

import (
	"bytes"

	"golang.org/x/sys/unix"
)

type unixName struct{}

func (unixName) release() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return string(bytes.TrimRight(u.Release[:], "\x00"))
}
