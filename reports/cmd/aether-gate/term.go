package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// screen is what the gate prints for a person: whole lines, each cut to
// width, and on a terminal one status line below them, rewritten in
// place, which a whole line clears and then redraws under itself.
type screen struct {
	w   io.Writer
	tty bool
	// status is the status line on screen now ("" when none).
	status string
}

func newScreen(w io.Writer) *screen {
	return &screen{w: w, tty: isTerminal(w)}
}

// isTerminal says whether w is a terminal, where a status line can be
// rewritten; anywhere else (a CI log, a file) lines only append.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// line prints one whole line.
func (s *screen) line(l string) {
	if s.status != "" {
		fmt.Fprint(s.w, "\r\033[K")
	}
	fmt.Fprintln(s.w, fit(l))
	if s.status != "" {
		fmt.Fprint(s.w, s.status)
	}
}

// lines prints each of ls.
func (s *screen) lines(ls []string) {
	for _, l := range ls {
		s.line(l)
	}
}

// setStatus rewrites the status line; off a terminal it does nothing.
func (s *screen) setStatus(l string) {
	if !s.tty {
		return
	}
	s.status = fit(l)
	fmt.Fprint(s.w, "\r\033[K"+s.status)
}

// clearStatus removes the status line.
func (s *screen) clearStatus() {
	if s.status != "" {
		fmt.Fprint(s.w, "\r\033[K")
		s.status = ""
	}
}
