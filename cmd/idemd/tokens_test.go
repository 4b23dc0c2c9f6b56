package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

// Tokens of the reload tests: each at least api.TokenBytesMin bytes.
const (
	oldToken = "old-token-0123456789"
	newToken = "new-token-0123456789"
)

// Log lines the tokens code writes, as the tests look for them.
const (
	logReloaded    = "auth: bearer tokens reloaded"
	logNotReloaded = "auth: tokens not reloaded; the previous tokens stay in force"
)

// writeTokens writes a tokens file with mode 0600, whatever the umask.
func writeTokens(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoadTokens_WarnsWhenOthersMayRead: a tokens file that group or
// others may read draws a warning naming the file and its mode and saying
// how to fix it; an owner-only file draws none.
func TestLoadTokens_WarnsWhenOthersMayRead(t *testing.T) {
	t.Parallel()
	const warning = "auth: the tokens file is readable by group or others; chmod 600 it"
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o640, true}, {0o604, true}, {0o644, true}} {
		path := filepath.Join(t.TempDir(), "tokens")
		writeTokens(t, path, "alice:"+oldToken+"\n")
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if _, err := loadTokens(path, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		got := logs.String()
		if warned := strings.Contains(got, warning); warned != c.warn {
			t.Errorf("mode %#o: warned %v, want %v: %s", c.mode, warned, c.warn, got)
		}
		if c.warn && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, "file="+path) ||
			!strings.Contains(got, fmt.Sprintf("mode=%#o", c.mode))) {
			t.Errorf("mode %#o: not a warning naming the file and its mode: %s", c.mode, got)
		}
		if strings.Contains(got, oldToken) {
			t.Errorf("the log prints a token: %s", got)
		}
	}
}

// TestReloadTokens_SwapsOrKeepsTheSet: a reload of a good file puts its
// tokens in force at once (the removed token is 401 from then on, the new
// one authenticates) and logs the count; a file that cannot be used —
// malformed, empty, a short token, gone — keeps the set in force and logs
// why at Error.
func TestReloadTokens_SwapsOrKeepsTheSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "alice:"+oldToken+"\n")
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-tokens", path)
	d := p.daemon(t)
	c := apitest.NewClient(t, "http://"+p.addr)
	c.WithToken(oldToken).Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	writeTokens(t, path, "# rotated\nalice:"+newToken+"\nbob:bob-token-0123456789\n")
	if err := d.reloadTokens(); err != nil {
		t.Fatal(err)
	}
	c.WithToken(oldToken).Do("GET", "/v1/tables", nil).Problem(t, 401)
	c.WithToken(newToken).Do("PUT", "/v1/tables/t", nil).JSON(t, 200, nil) // alice's own table
	if rec := p.wait(logReloaded); rec["tokens"] != 2.0 || rec["level"] != "INFO" {
		t.Fatalf("reload log %v", rec)
	}

	for _, bad := range []struct{ name, content, want string }{
		{"malformed", "alice\n", "line 1: want principal:token"},
		{"empty", "# nobody\n", "no principal:token line"},
		{"short", "alice:" + newToken + "\nbob:s3cret\n", `line 2: principal "bob": token shorter than 16 bytes`},
		{"gone", "", "cannot open"},
	} {
		if bad.name == "gone" {
			os.Remove(path)
		} else {
			writeTokens(t, path, bad.content)
		}
		err := d.reloadTokens()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%s file: %v, want %q", bad.name, err, bad.want)
		}
		c.WithToken(newToken).Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
		c.WithToken(oldToken).Do("GET", "/v1/tables", nil).Problem(t, 401)
	}
	if rec := p.wait(logNotReloaded); rec["level"] != "ERROR" || rec["file"] != path {
		t.Fatalf("refused reload log %v", rec)
	}
	if n := strings.Count(p.logs.String(), logNotReloaded); n != 4 {
		t.Fatalf("%d refused-reload lines for 4 bad files\n%s", n, p.logs)
	}
	if strings.Contains(p.logs.String(), "s3cret") {
		t.Fatalf("the log prints a token:\n%s", p.logs)
	}
}

// TestReloadTokens_WithoutTokensIsIgnored: a server started without
// -tokens has nothing to reload; it says so and stays anonymous.
func TestReloadTokens_WithoutTokensIsIgnored(t *testing.T) {
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir())
	if err := p.daemon(t).reloadTokens(); err != nil {
		t.Fatal(err)
	}
	p.wait("auth: SIGHUP ignored: idemd was started without -tokens, so there is no tokens file to reload")
	apitest.NewClient(t, "http://"+p.addr).Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
}

// TestSIGHUP_ReloadsTokens: SIGHUP to an idemd process reloads its tokens
// file (and does not end it, as SIGHUP's default action would); a bad file
// sent the same way keeps the set in force.
func TestSIGHUP_ReloadsTokens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "alice:"+oldToken+"\n")
	c := apitest.NewClient(t, "http://unused").WithToken(oldToken)
	p := apitest.Start(t, c, t.TempDir(), nil, "-tokens", path)
	c = c.WithBase(p.Base())
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	writeTokens(t, path, "alice:"+newToken+"\n")
	p.Signal(syscall.SIGHUP)
	if !p.WaitLog(logReloaded, apitest.StartTimeout) {
		t.Fatalf("no reload after SIGHUP:\n%s", p.Logs())
	}
	c.Do("GET", "/v1/tables", nil).Problem(t, 401)
	c.WithToken(newToken).Do("PUT", "/v1/tables/t", nil).JSON(t, 200, nil)

	writeTokens(t, path, "alice:short\n")
	p.Signal(syscall.SIGHUP)
	if !p.WaitLog(logNotReloaded, apitest.StartTimeout) {
		t.Fatalf("no refused reload after SIGHUP with a bad file:\n%s", p.Logs())
	}
	c.WithToken(newToken).Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
	c.CloseIdleConnections()
	p.Term()
}
