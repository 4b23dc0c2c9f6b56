package main

import (
	"flag"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
)

// readmeServer, if set, is the idemd the README's walk-through runs
// against instead of one this test starts: .ci/sdk-install passes the
// server its SDK snippets then run against, in the README's order.
var readmeServer = flag.String("readme.server", "", "run the README walk-through against this idemd (http://host:port) instead of starting one")

// readmeScriptTimeout bounds one README block's run: a dozen curl calls
// against a local server, with room for a loaded machine.
const readmeScriptTimeout = 2 * time.Minute

// readmeBlocks are the README's shell blocks that run against `make run`'s
// server, in the README's order: each section's first sh block.
var readmeBlocks = []string{"## Walk-through", "### Interactive sessions"}

// TestREADME_WalkThroughRunsAsWritten: the walk-through and the sessions
// blocks run as written, in order, against one server (only its address
// substituted for localhost:8420), and every answer the README shows
// ("#   " lines) is in what the commands printed, in order: a status line
// and its headers and body within the same answer, "…" or "..." standing
// for anything.
func TestREADME_WalkThroughRunsAsWritten(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	base := *readmeServer
	if base == "" {
		p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir())
		base = "http://" + p.addr
	}
	host := strings.TrimPrefix(base, "http://")
	for _, section := range readmeBlocks {
		block := testsupport.ReadmeBlock(t, "../../README.md", section, "sh")
		// curl's answers end without a newline: one after each keeps
		// them apart, as a terminal's prompt would.
		script := "set -eu\ncurl() { command curl \"$@\"; echo; }\n" + strings.ReplaceAll(block, "localhost:8420", host)
		cmd := exec.Command("bash", "-c", script)
		cmd.WaitDelay = time.Second
		timer := time.AfterFunc(readmeScriptTimeout, func() { _ = cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		if err != nil {
			t.Fatalf("%s: %v\n%s", section, err, out)
		}
		if err := shownAnswersIn(block, string(out)); err != "" {
			t.Fatalf("%s: %s\noutput:\n%s", section, err, out)
		}
	}
}

// shownAnswersIn returns what of block's shown answers output lacks ("":
// nothing). A group of consecutive "#   " lines is one answer; its first
// fragment (fragments are split by runs of 3 or more spaces) is found
// after the previous answer's, the others after it and before the next
// status line.
func shownAnswersIn(block, output string) string {
	pos := 0
	var group []string
	flush := func() string {
		if len(group) == 0 {
			return ""
		}
		defer func() { group = nil }()
		var frags []string
		for _, l := range group {
			frags = append(frags, fragmentSplit.Split(strings.TrimSpace(l), -1)...)
		}
		loc := answerPattern(frags[0]).FindStringIndex(output[pos:])
		if loc == nil {
			return "shown answer not printed (in order): " + frags[0]
		}
		start := pos + loc[0]
		pos = pos + loc[1]
		end := len(output)
		if i := strings.Index(output[pos:], "HTTP/1.1 "); i >= 0 {
			end = pos + i
		}
		for _, f := range frags[1:] {
			if !answerPattern(f).MatchString(output[start:end]) {
				return "shown answer not printed: " + f + " (in the answer to " + frags[0] + ")"
			}
		}
		return ""
	}
	for _, line := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "#   "); ok {
			group = append(group, rest)
			continue
		}
		if err := flush(); err != "" {
			return err
		}
	}
	return flush()
}

var fragmentSplit = regexp.MustCompile(` {3,}`)

// answerPattern is fragment as a case-insensitive pattern (header names
// are case-insensitive), with "…" and "..." matching anything on a line.
func answerPattern(fragment string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("(?i)")
	for i, part := range strings.Split(strings.ReplaceAll(fragment, "...", "…"), "…") {
		if i > 0 {
			b.WriteString(".*?")
		}
		b.WriteString(regexp.QuoteMeta(part))
	}
	return regexp.MustCompile(b.String())
}
