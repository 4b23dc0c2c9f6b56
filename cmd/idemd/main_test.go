package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
)

func TestParseFlags_RequestTimeoutCoversWaitMax(t *testing.T) {
	c, err := parseFlags([]string{"-wait-max", "90s", "-request-timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.requestTimeout != 100*time.Second {
		t.Fatalf("request timeout %v, want wait-max + 10s", c.requestTimeout)
	}
	c, err = parseFlags(nil, io.Discard)
	if err != nil || c.addr != "127.0.0.1:8420" || c.requestTimeout != 60*time.Second || c.waitMax != 30*time.Second {
		t.Fatalf("defaults %+v %v", c, err)
	}
}

// TestRun_RejectsBadConfiguration: configuration errors end run with an
// error before anything is opened; -h is flag.ErrHelp (exit 0 in main).
func TestRun_RejectsBadConfiguration(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data := filepath.Join(dir, "data")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-log-format", "xml"}, "-log-format"},
		{[]string{"-tokens", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"-tokens", write("bad", "alice\n")}, "line 1: want principal:token"},
		{[]string{"-tokens", write("dup", "# c\nalice:t\n\nbob:t\n")}, "line 4: token listed twice"},
		{[]string{"-no-such-flag"}, "not defined"},
	} {
		err := run(context.Background(), append(c.args, "-data", data), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a data directory was created: %v", err)
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

// TestRun_ServesUntilCanceled runs the server in-process on an ephemeral
// port, checks it answers, and stops it by canceling its context: run
// returns nil after a clean stop.
func TestRun_ServesUntilCanceled(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var logs bytes.Buffer
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "idemd: listening" {
				addrs <- rec.Addr
			}
		}
		close(addrs)
	}()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-log-format", "json"}, pw)
		pw.Close()
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no listening line within 20s")
	}
	c := apitest.NewClient(t, apitest.MustLoad(t), "http://"+addr)
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	c.Do("POST", "/v1/tables/t/batch", `{"deletes":["a"]}`, "Idempotency-Key", "k").JSON(t, 201, nil)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of cancel")
	}
	for range addrs { // drain until the logger's pipe closes
	}
	if !strings.Contains(logs.String(), `"msg":"idemd: stopped cleanly"`) {
		t.Fatalf("no clean stop:\n%s", logs.String())
	}
}
