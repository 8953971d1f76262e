package docker

import (
	"os"
	"strings"
)

// PrivilegedAsEnv names the flags a node container gets instead of
// --privileged, separated by newlines (aether's patch; see
// third_party/kind/README.md). A Docker engine before 23 asks the kernel for
// every capability under --privileged, so a daemon whose own bounding set
// lacks one fails every node with "unable to apply caps"; given the
// capabilities the daemon holds, all devices and unmasked paths instead, the
// node runs, and `docker exec` without --privileged inherits them.
const PrivilegedAsEnv = "KIND_EXPERIMENTAL_DOCKER_PRIVILEGED_AS"

func privilegedAs() ([]string, bool) {
	v := strings.TrimSpace(os.Getenv(PrivilegedAsEnv))
	if v == "" {
		return nil, false
	}
	var args []string
	for _, a := range strings.Split(v, "\n") {
		if a = strings.TrimSpace(a); a != "" {
			args = append(args, a)
		}
	}
	return args, true
}

func privilegedRunArgs() []string {
	if args, ok := privilegedAs(); ok {
		return args
	}
	return []string{"--privileged"}
}
