package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestForwarding_OffWithoutASecretSaysHowToTurnItOn: on etcd without
// -cluster-secret-file forwarding is off, with a warning naming the flag;
// with a secret it is on; on the local engine there is nothing to forward.
func TestForwarding_OffWithoutASecretSaysHowToTurnItOn(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	etcd := config{store: storeEtcd, node: "n-1"}
	if f := forwarding(etcd, nil, nil, log); f != nil || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "-cluster-secret-file") {
		t.Fatalf("without a secret: %+v, logged %q", f, logs.String())
	}
	secret := bytes.Repeat([]byte("k"), 32)
	if f := forwarding(etcd, secret, nil, log); f == nil || f.Node != "n-1" || !bytes.Equal(f.Secret, secret) || f.Client == nil {
		t.Fatalf("with a secret: %+v", f)
	}
	if f := forwarding(config{store: storeLocal}, secret, nil, log); f != nil {
		t.Fatalf("on the local engine: %+v", f)
	}
}

// TestPeerClient_NeverFollowsARedirect: the 307 comes back as the answer;
// its target is never asked.
func TestPeerClient_NeverFollowsARedirect(t *testing.T) {
	var trapped atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { trapped.Add(1) }))
	defer trap.Close()
	redirect := httptest.NewServer(http.RedirectHandler(trap.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	resp, err := peerClient(nil).Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || trapped.Load() != 0 {
		t.Fatalf("status %d, trap asked %d times", resp.StatusCode, trapped.Load())
	}
}

// TestLoadClusterSecret_TakesTheFileLessItsLineBreakAndWarnsIfOthersMayRead:
// the secret is the file's bytes without the trailing newline; a file
// others may read is taken, with a warning.
func TestLoadClusterSecret_TakesTheFileLessItsLineBreakAndWarnsIfOthersMayRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	hex := strings.Repeat("ab", 32)
	if err := os.WriteFile(p, []byte(hex+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	got, err := loadClusterSecret(p, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || string(got) != hex || !strings.Contains(logs.String(), "readable by others") {
		t.Fatalf("%q, %v; logged %q", got, err, logs.String())
	}
}
