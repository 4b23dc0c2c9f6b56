package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
)

// backupTimeout bounds an online backup's request: the server copies what
// it cannot link, a store's size at disk speed.
const backupTimeout = 30 * time.Minute

// warnLogger shows the engine's warnings (a torn tail cut at the open of
// an offline backup), not its progress.
var warnLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

var backupCommand = command{
	name:     "backup",
	synopsis: "DATA DEST | -server URL [-token-file FILE] NAME",
	summary:  "write a consistent copy of a data dir (stopped, or through a running server)",
	doc: "Offline: copy the stopped data dir DATA into DEST (new or empty): checkpoint parts, deltas,\n" +
		"value-log segments and the log, hard-linked where the file system allows, each file fsynced,\n" +
		"the manifest (BACKUP: its last version and that version's time) last. A dir a running idemd\n" +
		"holds is refused: back it up through the server instead.\n\n" +
		"Online, with -server: ask the running idemd (an operator's token) to write the backup NAME\n" +
		"under its -backup-dir while it serves.\n\n" +
		"Restore by starting idemd on a copy of the backup: it records a restore epoch and refuses,\n" +
		"for -retention, keys first sent before the restore that it does not know (docs/operations.md).\n" +
		"Exit 0 done, 1 the server refused (its problem is printed), 2 could not run.",
	run: runBackup,
}

func runBackup(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	server := fs.String("server", "", "the running server's base URL: back up through it (default: offline, DATA DEST)")
	tokenFile := fs.String("token-file", "", "with -server: read the bearer token from `FILE` (else $IDEM_TOKEN)")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *server != "" {
		if len(pos) != 1 {
			fmt.Fprintf(stderr, "idemctl backup -server: want one backup name, got %q\n", pos)
			return exitUsage
		}
		return backupOnline(*server, *tokenFile, pos[0], stdout, stderr)
	}
	if len(pos) != 2 {
		fmt.Fprintf(stderr, "idemctl backup: want DATA DEST, got %q\n", pos)
		fs.Usage()
		return exitUsage
	}
	m, err := engine.BackupDir(pos[0], pos[1], engine.Options{CheckpointLogBytes: -1, Logger: warnLogger})
	if err != nil {
		fmt.Fprintf(stderr, "idemctl backup: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "backup %s: version %d (%s), %d files (%d linked)\n", pos[1], m.Version,
		m.VersionTime.Format("2006-01-02T15:04:05.000Z07:00"), m.Files, m.Linked)
	return exitOK
}

// backupOnline asks the server for the backup name.
func backupOnline(server, tokenFile, name string, stdout, stderr io.Writer) int {
	token := os.Getenv("IDEM_TOKEN")
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "idemctl backup: %v\n", err)
			return exitUsage
		}
		token = strings.TrimSpace(string(b))
	}
	body, _ := json.Marshal(api.BackupRequest{Name: name})
	cl := &client{base: strings.TrimRight(server, "/"), token: token, http: &http.Client{Timeout: backupTimeout}}
	var res api.BackupResult
	if err := cl.send(http.MethodPost, "/v1/admin/backup", bytes.NewReader(body), &res); err != nil {
		fmt.Fprintf(stderr, "idemctl backup: %v\n", err)
		var p *problemError
		if errors.As(err, &p) {
			return exitDamage
		}
		return exitUsage
	}
	fmt.Fprintf(stdout, "backup %s: version %d (%s), %d files (%d linked)\n", res.Name, res.Version,
		res.VersionTime.Format("2006-01-02T15:04:05.000Z07:00"), res.Files, res.Linked)
	return exitOK
}
