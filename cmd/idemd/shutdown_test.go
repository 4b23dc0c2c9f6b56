package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// TestRun_ShutdownReportsRequestsThatMissedTheTimeout: a request still in
// its handler when -shutdown-timeout ends — here one whose body never
// arrives — is reported: a warning with the count, run's error (exit 1)
// says how many missed it, and there is no "stopped cleanly".
func TestRun_ShutdownReportsRequestsThatMissedTheTimeout(t *testing.T) {
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-shutdown-timeout", "200ms")
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers complete, body promised and never sent: the handler blocks
	// reading it until -request-timeout, far beyond -shutdown-timeout.
	if _, err := fmt.Fprintf(conn, "POST /v1/tables/t/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: k\r\nContent-Length: 100\r\n\r\n{\"deletes\":"); err != nil {
		t.Fatal(err)
	}
	d := p.daemon(t)
	testsupport.Poll(t, "the request to be in flight", runTimeout, func() bool { return d.inFlight.Load() == 1 })
	err = p.stop()
	if err == nil || err.Error() != "stopped; 1 request missed -shutdown-timeout 200ms" || exitCode(err) != 1 {
		t.Fatalf("run: %v (exit %d)\n%s", err, exitCode(err), p.logs)
	}
	warn := p.wait("idemd: requests still in flight at -shutdown-timeout; their receipts stay leased and the next start adopts them")
	if warn["level"] != "WARN" || warn["in_flight"] != 1.0 || warn["shutdown_timeout"] != "200ms" {
		t.Fatalf("warning %v", warn)
	}
	if strings.Contains(p.logs.String(), "stopped cleanly") {
		t.Fatalf("a stop that cut a request logged a clean stop:\n%s", p.logs)
	}
}
