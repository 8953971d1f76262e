package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ClientTimeout bounds one call to the agent. The plugin runs inside the
// pod's ADD, which the kubelet is waiting on; a hung agent must cost the
// pod a second, not its start.
const ClientTimeout = time.Second

// The agent's endpoints. The host part of the URL is ignored: the
// transport always dials the socket.
const (
	pathPods = "/v1/pods"
	baseURL  = "http://aether-agent"
)

// Client is the plugin's side: it records pods in the socket's StateDir and
// tells the agent listening on the socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient returns a client for the agent on socket.
func NewClient(socket string) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Client{Socket: socket, http: &http.Client{Timeout: ClientTimeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}}
}

// AgentError is a failure to tell the agent, after the record was written
// (Add) or removed (Del): the agent learns of the change when it next
// starts.
type AgentError struct {
	Socket string
	Err    error
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("failed to reach the node agent on %q: %v", e.Socket, e.Err)
}
func (e *AgentError) Unwrap() error { return e.Err }

// Add records p, then tells the agent. The record comes first so that a pod
// the agent has heard of is one it re-learns after a restart. An error
// that is not an *AgentError means nothing was recorded and the agent was
// not called.
func (c *Client) Add(ctx context.Context, p Pod) error {
	if err := StateDir(c.Socket).Write(p); err != nil {
		return err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode pod %s: %w", &p, err)
	}
	return c.call(ctx, http.MethodPost, pathPods, body)
}

// Del removes the record of r, then tells the agent the pod is gone. An
// attachment with no record was never handed over (or its removal was
// already told), so the agent is not called for it.
func (c *Client) Del(ctx context.Context, r Ref) error {
	existed, err := StateDir(c.Socket).Remove(r)
	if err != nil || !existed {
		return err
	}
	return c.call(ctx, http.MethodDelete, pathPods+"/"+r.ContainerID+"/"+r.IfName, nil)
}

func (c *Client) call(ctx context.Context, method, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, bytes.NewReader(body))
	if err != nil {
		return &AgentError{c.Socket, err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return &AgentError{c.Socket, err}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &AgentError{c.Socket, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))}
	}
	return nil
}
