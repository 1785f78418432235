// Command clinic serves the clinic MCP server (internal/tools/clinic) on loopback for
// the walkthrough of docs/tools.md: a clinic's doctors and their free slots
// (find_doctors, read-only) and booking (book_slot, destructive, once per idempotency
// key). It serves until Ctrl-C.
//
//	go run ./hack/clinic                      # http://127.0.0.1:8766/mcp
//	go run ./hack/clinic -address 127.0.0.1:9000
//
// The manager must reach the address: a manager on this machine (DEMO_KEEP=1 make demo,
// make run) does; one in a cluster's pod needs an address of the cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

func main() {
	addr := flag.String("address", clinic.Address, "The address to serve on")
	flag.Parse()
	c, err := clinic.Listen(*addr, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clinic:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Printf("Clinic MCP server at %s (Ctrl-C to stop)\n", c.URL)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
