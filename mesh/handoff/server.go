package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxBody bounds a request; a pod's record is a few hundred bytes.
const maxBody = 64 << 10

// Server is the agent's side: it holds the pods handed over on this node
// and says when they change.
type Server struct {
	socket string
	log    *slog.Logger
	ln     net.Listener

	mu      sync.Mutex
	pods    map[Ref]Pod
	changed chan struct{}
}

// Listen binds the socket, replacing one a previous agent left behind, and
// then re-learns the pods recorded in StateDir(socket). Binding first
// matters: a plugin that could not reach the agent wrote its record before
// it tried, so every ADD or DEL is either in the directory as read here or
// is a call waiting in the socket's backlog, answered once Serve runs.
func Listen(socket string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the directory of handoff socket %q: %w", socket, err)
	}
	if fi, err := os.Lstat(socket); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("failed to remove the stale handoff socket %q: %w", socket, err)
		}
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on handoff socket %q: %w", socket, err)
	}
	s := &Server{socket: socket, log: log.With("handoff", socket), ln: ln, pods: map[Ref]Pod{}, changed: make(chan struct{})}
	if err := s.relearn(); err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

// relearn loads the records. A record whose netns is gone, or names
// another namespace now, is of a pod that went while no DEL could reach
// its record's reader; it is removed. An unreadable record is logged and
// left for an operator: it is not this agent's to delete.
func (s *Server) relearn() error {
	dir := StateDir(s.socket)
	pods, bad, err := dir.Read()
	if err != nil {
		return err
	}
	for _, err := range bad {
		s.log.Error("ignoring a handoff record", "err", err)
	}
	for _, p := range pods {
		if err := stillThere(&p); err != nil {
			s.log.Info("dropping the record of a pod whose netns is gone", "pod", p.String(), "reason", err)
			if _, err := dir.Remove(p.Ref); err != nil {
				s.log.Error("failed to drop a stale handoff record", "err", err)
			}
			continue
		}
		s.pods[p.Ref] = p
	}
	s.log.Info("re-learned handed-over pods", "pods", len(s.pods), "dir", string(dir))
	return nil
}

// Pods returns the pods handed over, sorted by namespace, name and
// attachment, and a channel closed at the next change.
func (s *Server) Pods() ([]Pod, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.Ref.String(), b.Namespace+"/"+b.Name+"/"+b.Ref.String())
	})
	return out, s.changed
}

func (s *Server) update(fn func(map[Ref]Pod) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn(s.pods) {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Serve answers the plugin until ctx ends, then closes the socket.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("handoff socket %q: %w", s.socket, err)
}

// handler routes the plugin's calls.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathPods, s.handleAdd)
	mux.HandleFunc("DELETE "+pathPods+"/{containerID}/{ifname}", s.handleDel)
	mux.HandleFunc("GET "+pathPods, s.handleList)
	return mux
}

// Close closes the socket without serving; Serve closes it itself.
func (s *Server) Close() error { return s.ln.Close() }

func (s *Server) handleAdd(w http.ResponseWriter, r *http.Request) {
	p, err := DecodePod(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "invalid pod: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.update(func(m map[Ref]Pod) bool {
		old, had := m[p.Ref]
		m[p.Ref] = p
		return !had || !equal(&old, &p)
	})
	s.log.Info("pod handed over", "pod", p.String(), "uid", p.UID, "ips", p.IPs)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleDel(w http.ResponseWriter, r *http.Request) {
	ref := Ref{ContainerID: r.PathValue("containerID"), IfName: r.PathValue("ifname")}
	if err := ref.Validate(); err != nil {
		http.Error(w, "invalid attachment: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.update(func(m map[Ref]Pod) bool {
		gone, had := m[ref]
		if had {
			delete(m, ref)
			s.log.Info("pod gone", "pod", gone.String())
		}
		return had
	})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleList(w http.ResponseWriter, _ *http.Request) {
	pods, _ := s.Pods()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(pods)
}

func equal(a, b *Pod) bool {
	return a.Ref == b.Ref && a.Network == b.Network && a.Namespace == b.Namespace && a.Name == b.Name &&
		a.UID == b.UID && a.Netns == b.Netns && a.NetnsInode == b.NetnsInode && slices.Equal(a.IPs, b.IPs)
}
