//go:build tools

// Package tools pins the Kubernetes programs and etcd a kind node image carries, so
// that `go build` of them in this module uses one tested set of versions,
// apart from the main module's dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"

	_ "go.etcd.io/etcd/server/v3"
)
