package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// TestBackup_OfflineCopiesAStoppedDirThatCheckPasses: backup DATA DEST
// refuses a dir a process holds (exit 2), copies a stopped one, and check
// passes on the copy, which holds every key.
func TestBackup_OfflineCopiesAStoppedDirThatCheckPasses(t *testing.T) {
	dir, keys := dataDir(t)
	db, err := engine.Open(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "b")
	if out := expectExit(t, exitUsage, "backup", dir, dest); !strings.Contains(out, "locked") {
		t.Fatalf("backup of a live dir: %s", out)
	}
	db.Close()
	expectExit(t, exitOK, "backup", dir, dest)
	if out := expectExit(t, exitOK, "check", dest); !strings.Contains(out, "result       clean") {
		t.Fatalf("check of the backup: %s", out)
	}
	back, err := engine.Open(dest, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	items, err := back.Scan(context.Background(), nil, nil, store.ScanLimitMax)
	if err != nil || len(items) != keys {
		t.Fatalf("the backup holds %d keys (%v), want %d", len(items), err, keys)
	}
	expectExit(t, exitUsage, "backup", dir, dest) // dest not empty
}

// TestBackup_OnlineThroughTheServer: backup -server NAME is the operator's
// (alice is refused, exit 1), writes under the server's backup dir, and a
// server without one answers 501 (exit 1).
func TestBackup_OnlineThroughTheServer(t *testing.T) {
	db, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := receipt.Open(context.Background(), db, receipt.Options{MaintainInterval: -1, CleanInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	backups := t.TempDir()
	tokens := map[string]string{"tok-a": "alice", "tok-ops": "ops"}
	with := httptest.NewServer(api.New(svc, api.Options{Tokens: tokens, Admins: []string{"ops"},
		Backup: func(name string) (engine.BackupManifest, error) { return db.Backup(filepath.Join(backups, name)) }}))
	t.Cleanup(with.Close)
	without := httptest.NewServer(api.New(svc, api.Options{Tokens: tokens, Admins: []string{"ops"}}))
	t.Cleanup(without.Close)

	ops, alice := tokenFile(t, "tok-ops"), tokenFile(t, "tok-a")
	if out := expectExit(t, exitDamage, "backup", "-server", with.URL, "-token-file", alice, "b1"); !strings.Contains(out, "forbidden") {
		t.Fatalf("alice: %s", out)
	}
	if out := expectExit(t, exitOK, "backup", "b1", "-server", with.URL, "-token-file", ops); !strings.Contains(out, "backup b1: version") {
		t.Fatalf("ops: %s", out)
	}
	expectExit(t, exitOK, "check", filepath.Join(backups, "b1"))
	if out := expectExit(t, exitDamage, "backup", "-server", without.URL, "-token-file", ops, "b2"); !strings.Contains(out, "not_implemented") {
		t.Fatalf("a server without -backup-dir: %s", out)
	}
}
