// Command idemd serves Idem over HTTP on an embedded data directory.
//
//	go run ./cmd/idemd                 # 127.0.0.1:8420, data in ./data
//	go run ./cmd/idemd -h              # every flag
//
// SIGTERM or SIGINT shut it down gracefully: stop accepting, let in-flight
// requests finish (up to -shutdown-timeout), stop the background loops and
// close the engine cleanly. Receipts still in flight keep their leases; the
// next start adopts them at once (new incarnation). SIGHUP reloads the
// -tokens file.
//
// Exit status: 0 after a clean stop, -h or -version; 2 for a command line
// it cannot run with (a flag it cannot parse, a value out of range, an
// argument that is not a flag); 1 for an error while starting or running,
// including a shutdown that requests outlived. (A panic exits 2, as Go
// programs do.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/idemdb/idem/fault"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "idemd:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode follows the flag package's convention: -h is not a failure, a
// command line that cannot be used is 2.
func exitCode(err error) int {
	var u *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// run is idemd until ctx is done or a signal stops it. Errors are
// *usageError for the command line, anything else for the run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWatched(ctx, args, stdout, stderr, nil)
}

// runWatched is run that hands the started daemon, before it serves, to
// watch when not nil: tests see its in-flight count.
func runWatched(ctx context.Context, args []string, stdout, stderr io.Writer, watch func(*daemon)) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.version {
		_, err := fmt.Fprintln(stdout, versionLine())
		return err
	}
	log := newLogger(c, stderr)
	slog.SetDefault(log)
	logStart(log, c)
	if err := checkFailpoints(log, os.Getenv(fault.EnvVar)); err != nil {
		return err
	}
	d, err := start(ctx, c, log, stderr)
	if err != nil {
		return err
	}
	if watch != nil {
		watch(d)
	}
	return d.serve(ctx)
}
