package cni

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/aether-mesh/aether/mesh/handoff"
)

// handOver records the pod beside the agent's socket and tells the agent
// (package handoff). A sandbox the runtime names no Kubernetes pod for is
// nothing the agent can match to the registry, so it is not handed over.
func (c *Config) handOver(args *skel.CmdArgs, pod Pod) error {
	ka, err := podArgs(args)
	if err != nil {
		return err
	}
	if ka.K8S_POD_NAMESPACE == "" || ka.K8S_POD_NAME == "" {
		c.log.Info("no K8S_POD_NAMESPACE and K8S_POD_NAME in CNI_ARGS: not a Kubernetes pod, not handed over", "container", args.ContainerID)
		return nil
	}
	ino, err := handoff.NetnsInode(args.Netns)
	if err != nil {
		return err
	}
	p := handoff.Pod{
		Ref:       handoff.Ref{ContainerID: args.ContainerID, IfName: args.IfName},
		Network:   c.Name,
		Namespace: string(ka.K8S_POD_NAMESPACE), Name: string(ka.K8S_POD_NAME), UID: string(ka.K8S_POD_UID),
		Netns: args.Netns, NetnsInode: ino,
	}
	for _, a := range pod.Addrs {
		p.IPs = append(p.IPs, a.Addr())
	}
	if err := handoff.NewClient(c.AgentSocket).Add(context.Background(), p); err != nil {
		return err
	}
	c.log.Info("pod handed over", "pod", p.String(), "socket", c.AgentSocket)
	return nil
}

// handOverFailed decides what a failed handoff does to the ADD: nothing
// but a warning unless requireAgent, else the ADD fails and what it did is
// undone (the record, the agent's copy should it have taken the pod late,
// the rules).
func (c *Config) handOverFailed(args *skel.CmdArgs, in *Installer, herr error) error {
	var agentErr *handoff.AgentError
	if !c.RequireAgent {
		if errors.As(herr, &agentErr) {
			c.log.Warn("the node agent did not take the pod; it learns of it from the record when it is back", "err", herr)
		} else {
			c.log.Error("pod not handed over to the node agent: it gets no capture listener", "err", herr)
		}
		return nil
	}
	undo := c.forget(args)
	if err := in.Remove(); err != nil {
		undo = errors.Join(undo, fmt.Errorf("removing the capture rules: %w", err))
	}
	code := uint(types.ErrInternal)
	if errors.As(herr, &agentErr) {
		code = types.ErrTryAgainLater
	}
	msg := fmt.Sprintf("requireAgent: failed to hand pod %s over to the node agent on %q", args.ContainerID, c.AgentSocket)
	if undo != nil {
		return types.NewError(code, msg, fmt.Sprintf("%v; rolling back failed: %v", herr, undo))
	}
	return types.NewError(code, msg, herr.Error())
}

// forget removes the attachment's record and tells the agent, when there
// was one. Only a record that could not be removed is an error: an agent
// that is away learns of the DEL from the record's absence.
func (c *Config) forget(args *skel.CmdArgs) error {
	ref := handoff.Ref{ContainerID: args.ContainerID, IfName: args.IfName}
	if ref.Validate() != nil {
		return nil // a name no record can have
	}
	err := handoff.NewClient(c.AgentSocket).Del(context.Background(), ref)
	var agentErr *handoff.AgentError
	if errors.As(err, &agentErr) {
		c.log.Warn("the node agent did not hear of the DEL; it drops the pod when it restarts", "container", args.ContainerID, "err", err)
		return nil
	}
	return err
}

// collect forgets this network's records whose attachment the runtime no
// longer lists (GC, spec 1.1.0).
func (c *Config) collect(valid []types.GCAttachment) error {
	dir := handoff.StateDir(c.AgentSocket)
	pods, bad, err := dir.Read()
	if err != nil {
		return err
	}
	for _, b := range bad {
		c.log.Warn("GC: ignoring a handoff record", "err", b)
	}
	var errs []error
	for _, p := range pods {
		keep := slices.ContainsFunc(valid, func(a types.GCAttachment) bool {
			return a.ContainerID == p.ContainerID && a.IfName == p.IfName
		})
		if keep || p.Network != c.Name {
			continue
		}
		c.log.Info("GC: forgetting a pod the runtime no longer has", "pod", p.String())
		args := &skel.CmdArgs{ContainerID: p.ContainerID, IfName: p.IfName}
		if err := c.forget(args); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
