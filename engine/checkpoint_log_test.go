package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestCheckpoint_LogsCompletion: a completed checkpoint is reported at info
// level with its index, size, parts and duration; a call with nothing new
// to write reports nothing.
func TestCheckpoint_LogsCompletion(t *testing.T) {
	var logs bytes.Buffer
	db := openT(t, t.TempDir(), Options{CheckpointLogBytes: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	defer db.Close()
	v, err := db.Apply(context.Background(), new(store.Batch).Put([]byte("a"), []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "engine: checkpoint written" {
			got = append(got, rec)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d checkpoint lines, want 1:\n%s", len(got), logs.String())
	}
	rec := got[0]
	if rec["level"] != "INFO" || rec["index"] != float64(v) || rec["parts"] != 1.0 || rec["bytes"].(float64) <= 0 || rec["duration"] == nil {
		t.Fatalf("checkpoint line %v", rec)
	}
}
