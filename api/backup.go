package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
)

// An operator takes a backup of a live embedded store through
//
//	POST /v1/admin/backup  {"name": "nightly-2026-12-05"}
//
// (docs/operations.md, "Backup and restore"). The server writes only under
// the directory idemd was started with (-backup-dir), to a plain name that
// does not exist yet: a route must not let a token holder write files
// anywhere the server can.

// backupNamePattern is a backup's name: one path element, no dot first
// (no "..", no hidden file).
var backupNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// BackupFunc writes a backup of the store under the server's backup
// directory, named name.
type BackupFunc func(name string) (engine.BackupManifest, error)

// BackupRequest is the body of POST /v1/admin/backup.
type BackupRequest struct {
	Name string `json:"name"`
}

// BackupResult is what a backup wrote (idemctl decodes it).
type BackupResult struct {
	Name        string    `json:"name"`
	Version     uint64    `json:"version"`
	VersionTime time.Time `json:"version_time"`
	Files       int       `json:"files"`
	Linked      int       `json:"linked"`
}

// backup serves POST /v1/admin/backup.
func (s *adminRoutes) backup(w http.ResponseWriter, r *http.Request) {
	if !s.auth.isAdmin(r) {
		writeProblem(w, code.Forbidden, "only an operator may take a backup")
		return
	}
	if s.opts.Backup == nil {
		writeProblem(w, code.NotImplemented, "this server takes no backups: start idemd with -backup-dir DIR "+
			"(embedded store only; on etcd use etcdctl snapshot save), or run idemctl backup DATA DEST on a stopped data dir")
		return
	}
	body, ok := s.bodies.readBody(w, r)
	if !ok {
		return
	}
	var req BackupRequest
	if err := json.Unmarshal(body, &req); err != nil || !backupNamePattern.MatchString(req.Name) {
		writeProblem(w, code.InvalidRequest, `the body must be {"name": NAME}, NAME one plain file name `+
			"(letters, digits, '.', '_', '-'; 1..128, not starting with '.'), the backup's directory under -backup-dir")
		return
	}
	m, err := s.opts.Backup(req.Name)
	if errors.Is(err, engine.ErrBackupDest) {
		writeProblem(w, code.InvalidRequest, "a backup named "+req.Name+" exists already: choose another name")
		return
	}
	if err != nil {
		s.failures.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("api: backup written", "name", req.Name, "principal", principalOf(r.Context()),
		"version", uint64(m.Version), "version_time", m.VersionTime)
	writeJSON(w, http.StatusOK, BackupResult{Name: req.Name, Version: uint64(m.Version), VersionTime: m.VersionTime,
		Files: m.Files, Linked: m.Linked})
}
