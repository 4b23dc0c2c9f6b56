package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemdb/idem/api"
)

var receiptsCommand = command{
	name:     "receipts",
	synopsis: "list|get|session|resolve ... [-server URL] [-token-file FILE]",
	summary:  "see and unstick receipts on a running server",
	doc: "Against a running idemd (its HTTP API):\n\n" +
		"  list [-state all|pending|started|mutable|terminal] [-older-than D] [-principal P | -all] [-limit N] [-json]\n" +
		"      the caller's receipts by state and age (an operator's, with -principal or -all, anyone's),\n" +
		"      every state unless -state says, following the server's cursor up to -limit\n" +
		"  get TABLE KEY           one receipt: its state, outcome and expiry\n" +
		"  session SESSION_ID      the receipt of a session's commit\n" +
		"  session SESSION_ID      the receipt of a session's commit (bound to no table, so get cannot name it)\n" +
		"  resolve TXN_ID          resolve a stuck started receipt (operators only): the decision in force,\n" +
		"                          or a presumed abort through the decision's create-if-absent\n\n" +
		"Flags go before or after the verb. The bearer token is read from -token-file, else $IDEM_TOKEN\n" +
		"(none: a server without tokens). Exit 0 done, 1 the server refused (its problem is printed), 2 could not run.",
	run: runReceipts,
}

// receiptsVerb is a verb of receipts: define adds its flags to the
// command's flag set and returns what runs it with the positional
// arguments after the verb.
type receiptsVerb struct {
	name   string
	define func(fs *flag.FlagSet) func(cl *client, args []string, stdout, stderr io.Writer) int
}

var receiptsVerbs = []receiptsVerb{
	{"list", listFlags},
	{"get", func(*flag.FlagSet) func(*client, []string, io.Writer, io.Writer) int { return receiptsGet }},
	{"session", func(*flag.FlagSet) func(*client, []string, io.Writer, io.Writer) int { return receiptsSession }},
	{"resolve", func(*flag.FlagSet) func(*client, []string, io.Writer, io.Writer) int { return receiptsResolve }},
}

// receiptsFlags is the flag set of receipts with verb's flags (nil: only
// the common ones); server and token are the common flags' values.
func receiptsFlags(c command, stderr io.Writer, verb *receiptsVerb) (fs *flag.FlagSet, server, token *string, run func(*client, []string, io.Writer, io.Writer) int) {
	fs = newFlags(c, stderr)
	server = fs.String("server", "http://127.0.0.1:8420", "the server's base URL")
	token = fs.String("token-file", "", "read the bearer token from `FILE` (else $IDEM_TOKEN)")
	if verb != nil {
		run = verb.define(fs)
	}
	fs.Usage = func() { receiptsUsage(c, stderr) }
	return fs, server, token, run
}

// receiptsUsage is the usage with every flag and its default: the
// common ones, then each verb's.
func receiptsUsage(c command, w io.Writer) {
	fmt.Fprintf(w, "usage: idemctl %s %s\n\n%s\n\nflags:\n", c.name, c.synopsis, c.doc)
	fs, _, _, _ := receiptsFlags(c, w, nil)
	fs.PrintDefaults()
	for i := range receiptsVerbs {
		v := &receiptsVerbs[i]
		own := flag.NewFlagSet(v.name, flag.ContinueOnError)
		own.SetOutput(w)
		v.define(own)
		if hasFlags(own) {
			fmt.Fprintf(w, "\n%s flags:\n", v.name)
			own.PrintDefaults()
		}
	}
}

func runReceipts(c command, args []string, stdout, stderr io.Writer) int {
	// The verb is the first argument that is no flag nor a flag's value,
	// whichever verb's flags the others are.
	probe := flag.NewFlagSet("probe", flag.ContinueOnError)
	probe.String("server", "", "")
	probe.String("token-file", "", "")
	for _, v := range receiptsVerbs {
		v.define(probe)
	}
	at := firstPositional(probe, args)
	var verb *receiptsVerb
	if at >= 0 {
		for i := range receiptsVerbs {
			if receiptsVerbs[i].name == args[at] {
				verb = &receiptsVerbs[i]
			}
		}
	}
	if verb == nil {
		for _, a := range args {
			if a == "-h" || a == "-help" || a == "--help" {
				receiptsUsage(c, stderr)
				return exitOK
			}
		}
		if at >= 0 {
			fmt.Fprintf(stderr, "idemctl receipts: unknown subcommand %q (list, get, session, resolve)\n", args[at])
		} else {
			receiptsUsage(c, stderr)
		}
		return exitUsage
	}
	fs, server, tokenFile, run := receiptsFlags(c, stderr, verb)
	pos, err := parseAnywhere(fs, append(args[:at:at], args[at+1:]...))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	token := os.Getenv("IDEM_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "idemctl receipts: %v\n", err)
			return exitUsage
		}
		token = strings.TrimSpace(string(b))
	}
	cl := &client{base: strings.TrimRight(*server, "/"), token: token, http: &http.Client{Timeout: clientTimeout}}
	return run(cl, pos, stdout, stderr)
}

// Bounds of a listing walked through the server's cursor.
const (
	listLimitDefault = 100
	listPagesMax     = 1000 // the server reads at most 4096 index entries a page
	clientTimeout    = 30 * time.Second
	responseBytesMax = 16 << 20
)

// client is the HTTP API as idemctl uses it.
type client struct {
	base  string
	token string
	http  *http.Client
}

// problemError is a problem the server answered.
type problemError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (p *problemError) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail) }

// do sends method path and decodes a 200 into out; a problem is a *problemError.
func (c *client) do(method, path string, out any) error { return c.send(method, path, nil, out) }

// send is do with a JSON body (nil: none).
func (c *client) send(method, path string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, responseBytesMax))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		p := &problemError{Status: resp.StatusCode}
		if json.Unmarshal(got, p) != nil || p.Code == "" {
			p.Code, p.Detail = "unexpected", strings.TrimSpace(string(got))
		}
		return p
	}
	return json.Unmarshal(got, out)
}

// refused prints err and says how idemctl exits for it.
func refused(stderr io.Writer, what string, err error) int {
	fmt.Fprintf(stderr, "idemctl receipts %s: %v\n", what, err)
	var p *problemError
	if errors.As(err, &p) {
		return exitDamage
	}
	return exitUsage
}

// listStates are the server's states -state all lists, one listing each.
var listStates = []string{"mutable", "terminal"}

// listFlags defines list's flags and returns what lists.
func listFlags(fs *flag.FlagSet) func(*client, []string, io.Writer, io.Writer) int {
	state := fs.String("state", "all", "all, pending, started, mutable (pending and started) or terminal")
	older := fs.Duration("older-than", 0, "only receipts created (mutable) or completed (terminal) at least this long ago")
	principal := fs.String("principal", "", "an operator: list this principal's receipts")
	all := fs.Bool("all", false, "an operator: list every principal's receipts")
	limit := fs.Int("limit", listLimitDefault, "list at most this many")
	asJSON := fs.Bool("json", false, "print one JSON array")
	return func(cl *client, args []string, stdout, stderr io.Writer) int {
		if len(args) != 0 || *limit < 1 || (*all && *principal != "") {
			fmt.Fprintln(stderr, "usage: idemctl receipts list [-state S] [-older-than D] [-principal P | -all] [-limit N] [-json]")
			return exitUsage
		}
		states := []string{*state}
		if *state == "all" {
			states = listStates
		}
		var got []api.ListedReceipt
		seen := map[string]bool{} // a terminal receipt owing visibility is in both listings
		for _, st := range states {
			q := url.Values{"state": {st}}
			if *older > 0 {
				q.Set("older_than", older.String())
			}
			switch {
			case *all:
				q.Set("principal", "")
			case *principal != "":
				q.Set("principal", *principal)
			}
			page, err := listPages(cl, q, *limit-len(got))
			if err != nil {
				return refused(stderr, "list", err)
			}
			for _, r := range page {
				if !seen[r.TransactionID] {
					seen[r.TransactionID] = true
					got = append(got, r)
				}
			}
		}
		return printListed(stdout, got, *asJSON)
	}
}

// listPages follows the server's cursor for query q, up to limit receipts.
func listPages(cl *client, q url.Values, limit int) ([]api.ListedReceipt, error) {
	var got []api.ListedReceipt
	for page := 0; len(got) < limit && page < listPagesMax; page++ {
		q.Set("limit", fmt.Sprint(min(limit-len(got), 1000)))
		var p api.ReceiptList
		if err := cl.do("GET", "/v1/receipts?"+q.Encode(), &p); err != nil {
			return nil, err
		}
		got = append(got, p.Receipts...)
		if p.Next == "" {
			break
		}
		q.Set("cursor", p.Next)
	}
	return got, nil
}

// printListed prints the listing as a table, or as one JSON array.
func printListed(stdout io.Writer, got []api.ListedReceipt, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(got)
		return exitOK
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTION\tPRINCIPAL\tTABLE\tKEY\tSTATE\tAGE\tOWNER/OUTCOME")
	for _, r := range got {
		at, who := r.Created, r.Owner
		if r.Completed != nil {
			at, who = *r.Completed, r.Outcome
		}
		if r.ResolvedBy != "" {
			who += " (resolved by " + r.ResolvedBy + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.TransactionID, r.Principal, r.Table, r.Key, r.State,
			now.Sub(at).Round(time.Second), who)
	}
	tw.Flush()
	return exitOK
}

func receiptsGet(cl *client, args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: idemctl receipts get TABLE KEY")
		return exitUsage
	}
	var v json.RawMessage
	if err := cl.do("GET", "/v1/receipts/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1]), &v); err != nil {
		return refused(stderr, "get", err)
	}
	return printIndented(stdout, v)
}

// receiptsSession prints the receipt of a session's commit
// (GET /v1/sessions/{id}/receipt).
func receiptsSession(cl *client, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: idemctl receipts session SESSION_ID")
		return exitUsage
	}
	var v json.RawMessage
	if err := cl.do("GET", "/v1/sessions/"+url.PathEscape(args[0])+"/receipt", &v); err != nil {
		return refused(stderr, "session", err)
	}
	return printIndented(stdout, v)
}

func receiptsResolve(cl *client, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: idemctl receipts resolve TXN_ID")
		return exitUsage
	}
	var v json.RawMessage
	if err := cl.do("POST", "/v1/admin/receipts/"+url.PathEscape(args[0])+"/resolve", &v); err != nil {
		return refused(stderr, "resolve", err)
	}
	return printIndented(stdout, v)
}

func printIndented(w io.Writer, v json.RawMessage) int {
	var out any
	if err := json.Unmarshal(v, &out); err != nil {
		return exitUsage
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	return exitOK
}
