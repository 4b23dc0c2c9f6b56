// Command idemctl is the operator's tool for Idem data.
//
//	idemctl check [-json] DATA   verify a stopped data dir offline
//	idemctl backup DATA DEST | -server URL NAME
//	                             copy a data dir consistently, stopped or live
//	idemctl etcd-restored -etcd-endpoints … -backup-time T
//	                             record an etcd restore (the restore fence)
//	idemctl receipts list|get|resolve ...
//	                             see and unstick receipts on a running server
//	idemctl help [COMMAND]       list the commands, or show one's usage
//
// check reads an embedded data dir (idemd -data) the way the engine's own
// open would — every WAL segment frame by frame, every checkpoint file
// whole, the checkpoint chain and whether the log reaches back to its tip,
// then the state an open builds, counted by namespace — and changes
// nothing, as `bbolt check` and `etcdutl snapshot status` do. It takes the
// dir's LOCK, so the dir of a running idemd is refused: stop the server,
// or check a copy. A torn tail of the last segment, the normal trace of a
// crash that the next open cuts, is printed as a warning; damage anywhere
// (a changed byte in a segment or a checkpoint, a lost checkpoint link, a
// key outside every namespace) is printed with the file and offset.
//
// Exit status: 0 done and clean (warnings allowed); 1 damage found; 2 the
// command could not run — a usage error, a dir in use, a dir that is not
// a data dir, or an I/O error.
//
// Commands are the entries of commands(): a new one is a file with its
// command value and a line there. Each parses its own flags with the
// standard flag package.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// Exit statuses.
const (
	exitOK     = 0
	exitDamage = 1 // a check found damage
	exitUsage  = 2 // the command could not run
)

// command is one subcommand of idemctl.
type command struct {
	name     string
	synopsis string // its arguments, as usage shows them
	summary  string // one line, for the list of commands
	doc      string // what its own usage says beyond the summary
	// run runs it (c is the command itself, for its usage) with the
	// arguments after its name and returns the exit status.
	run func(c command, args []string, stdout, stderr io.Writer) int
}

// commands is the table of subcommands, in the order help lists them.
func commands() []command {
	return []command{checkCommand, backupCommand, etcdRestoredCommand, receiptsCommand}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is idemctl with args (without the program name).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(args[1:], stdout, stderr)
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "idemctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(c, args[1:], stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// help lists the commands, or shows one's usage, on stdout.
func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "idemctl help: unknown command %q\n", args[0])
			return exitUsage
		}
		return c.run(c, []string{"-h"}, stdout, stdout)
	}
	fmt.Fprintln(stderr, "usage: idemctl help [COMMAND]")
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: idemctl COMMAND [ARGS]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.synopsis, c.summary)
	}
	fmt.Fprintf(tw, "  help [COMMAND]\tlist the commands, or show one's usage\n")
	tw.Flush()
	fmt.Fprint(w, "\nexit status: 0 done (clean), 1 damage found or the server refused, 2 could not run (usage, dir in use, not a data dir, no server)\n")
}

// newFlags is a command's flag set: errors and -h go to stderr, under the
// command's synopsis.
func newFlags(c command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("idemctl "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: idemctl %s %s\n\n%s\n", c.name, c.synopsis, c.doc)
		if hasFlags(fs) {
			fmt.Fprint(stderr, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
