package h2

import (
	"fmt"
	"os"
	"sync"

	"github.com/aether-mesh/aether/mesh/proxy/hcm"
)

// LogFiles holds the proxy's open access log files, one per path, shared
// by every listener that names it; each line is written whole.
type LogFiles struct {
	mu    sync.Mutex
	files map[string]*logFile
	// Err receives a failure to open or write a log; nil drops it.
	Err func(error)
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
	if _, err := f.f.Write(*buf); err != nil {
		lf.report(fmt.Errorf("access log %s: %w", al.Path, err))
	}
}

// lineBufs holds the buffers access log lines are rendered into.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (lf *LogFiles) open(path string) (*logFile, error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.files[path]; f != nil {
		return f, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
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

// Close closes every file.
func (lf *LogFiles) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	var first error
	for p, f := range lf.files {
		if err := f.f.Close(); err != nil && first == nil {
			first = err
		}
		delete(lf.files, p)
	}
	return first
}
