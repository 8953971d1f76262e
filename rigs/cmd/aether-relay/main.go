// Command aether-relay runs inside a test pod and carries one client socket
// over its standard input and output (package rigs/relay): `udp HOST:PORT`
// relays framed datagrams on a connected UDP socket, `tcp HOST:PORT` the
// byte stream of one TCP connection. It ends when its input ends.
package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/aether-mesh/aether/rigs/relay"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "aether-relay: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 || (args[0] != "udp" && args[0] != "tcp") {
		return fmt.Errorf("usage: aether-relay udp|tcp HOST:PORT (got %q)", args)
	}
	conn, err := net.Dial(args[0], args[1])
	if err != nil {
		return fmt.Errorf("failed to dial %s %s: %w", args[0], args[1], err)
	}
	defer conn.Close()
	if args[0] == "udp" {
		return relay.ServeUDP(os.Stdin, os.Stdout, conn)
	}
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, os.Stdin)
		errc <- err
	}()
	go func() {
		_, err := io.Copy(os.Stdout, conn)
		errc <- err
	}()
	return <-errc
}
