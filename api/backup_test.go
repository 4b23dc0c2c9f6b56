package api_test

import (
	"path/filepath"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/check"
	"github.com/idemdb/idem/internal/testsupport"
)

// TestAdmin_BackupWritesOnlyAPlainNameUnderTheBackupDir: only an operator
// may take a backup; it goes to a plain name under the server's backup
// directory, never over an existing one nor to a path, and holds every
// batch acknowledged before it (its manifest's version covers them).
func TestAdmin_BackupWritesOnlyAPlainNameUnderTheBackupDir(t *testing.T) {
	if testsupport.OnReferenceStore() {
		t.Skip("backups are the embedded store's")
	}
	dir := t.TempDir()
	n := newNode(t, config{tokens: map[string]string{"tok-alice": "alice", "tok-ops": "ops"}, admins: []string{"ops"}, backupDir: dir})
	alice, ops := n.c.WithToken("tok-alice"), n.c.WithToken("tok-ops")
	alice.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	alice.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"d","doc":{"n":1}}]}`, "Idempotency-Key", "k1").JSON(t, 201, nil)
	if p := alice.Do("POST", "/v1/admin/backup", `{"name":"b1"}`).Problem(t, 403); p.Code != "forbidden" {
		t.Fatalf("alice takes a backup: %+v", p)
	}
	for _, bad := range []string{`{"name":"../escape"}`, `{"name":".hidden"}`, `{"name":"a/b"}`, `{"name":""}`, `{}`} {
		if p := ops.Do("POST", "/v1/admin/backup", bad).Problem(t, 400); p.Code != "invalid_request" {
			t.Fatalf("%s: %+v", bad, p)
		}
	}
	var res struct {
		Name    string `json:"name"`
		Version uint64 `json:"version"`
		Files   int    `json:"files"`
	}
	ops.Do("POST", "/v1/admin/backup", `{"name":"b1"}`).JSON(t, 200, &res)
	m, err := engine.ReadBackupManifest(nil, filepath.Join(dir, "b1"))
	if err != nil || uint64(m.Version) != res.Version || res.Files == 0 {
		t.Fatalf("answer %+v; manifest %+v, %v", res, m, err)
	}
	if rep, err := check.Dir(nil, filepath.Join(dir, "b1"), check.Options{}); err != nil || rep.Damaged() {
		t.Fatalf("check the backup: %v %+v", err, rep)
	}
	if p := ops.Do("POST", "/v1/admin/backup", `{"name":"b1"}`).Problem(t, 400); p.Code != "invalid_request" {
		t.Fatalf("a second backup named b1: %+v", p)
	}
}
