package h2

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/proxy/hcm"
)

// LogFiles holds the proxy's open access log files, one per path, shared
// by every listener that names it; each line is written whole or not at
// all: a write the disk cut short (a full disk) is cut back off, so the
// next line starts on a line of its own and the log stays one JSON line
// per request. A request whose line is lost is still served.
type LogFiles struct {
	mu    sync.Mutex
	files map[string]*logFile
	// closed is set by Close: a line a request finishing after it
	// would write is lost (reason "closed") rather than reopening the
	// file the proxy has let go of.
	closed bool
	// Err receives a failure to open or write a log, a *LogError; nil
	// drops it.
	Err func(error)
}

// LogError is an access log line that was not written.
type LogError struct {
	Path string
	// Torn is how many bytes of the line reached the file before the
	// failure, cut back off again.
	Torn int
	Err  error
}

func (e *LogError) Error() string {
	if e.Torn > 0 {
		return fmt.Sprintf("access log %s: a line lost (%d bytes written, then cut back off): %v", e.Path, e.Torn, e.Err)
	}
	return fmt.Sprintf("access log %s: a line lost: %v", e.Path, e.Err)
}

func (e *LogError) Unwrap() error { return e.Err }

// Reason is the failure as a counter's label: the errno's name (ENOSPC
// for a full disk, EDQUOT, EIO, ...), "closed" for a line written after
// Close, or "other".
func (e *LogError) Reason() string {
	if errors.Is(e.Err, os.ErrClosed) {
		return "closed"
	}
	if errno, ok := errors.AsType[syscall.Errno](e.Err); ok {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
	}
	return "other"
}

type logFile struct {
	mu sync.Mutex
	f  *os.File
}

// Write appends r as one JSON line to al's file. The line is rendered
// into a pooled buffer: the log is written for every request.
func (lf *LogFiles) Write(al *hcm.AccessLog, r hcm.Record) {
	f, err := lf.open(al.Path)
	if err != nil {
		lf.report(err)
		return
	}
	buf := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(buf)
	*buf = append(al.AppendLine((*buf)[:0], r), '\n')
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.f.Write(*buf)
	if err == nil {
		return
	}
	le := &LogError{Path: al.Path, Torn: n, Err: err}
	if n > 0 {
		if terr := cutTail(f.f, n); terr != nil {
			le.Err = errors.Join(err, fmt.Errorf("cutting the torn line back off: %w", terr))
		}
	}
	lf.report(le)
}

// cutTail removes the last n bytes of f: the part of a line a short
// write appended. The file's own end is read rather than remembered:
// during a hot restart the parent and the child append to the same log,
// and O_APPEND puts each write at the end as it is then.
func cutTail(f *os.File, n int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < int64(n) {
		return fmt.Errorf("the file is %d bytes, shorter than the %d torn", st.Size(), n)
	}
	return f.Truncate(st.Size() - int64(n))
}

// lineBufs holds the buffers access log lines are rendered into.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (lf *LogFiles) open(path string) (*logFile, error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.files[path]; f != nil {
		return f, nil
	}
	if lf.closed {
		return nil, &LogError{Path: path, Err: os.ErrClosed}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &LogError{Path: path, Err: err}
	}
	if lf.files == nil {
		lf.files = map[string]*logFile{}
	}
	lf.files[path] = &logFile{f: f}
	return lf.files[path], nil
}

func (lf *LogFiles) report(err error) {
	if lf.Err != nil {
		lf.Err(err)
	}
}

// Close closes every file; a later Write is lost and reported.
func (lf *LogFiles) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.closed = true
	var first error
	for p, f := range lf.files {
		if err := f.f.Close(); err != nil && first == nil {
			first = err
		}
		delete(lf.files, p)
	}
	return first
}
