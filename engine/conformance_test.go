package engine_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/storetest"
	"github.com/idemdb/idem/vfs/memfs"
)

// TestConformance: engine.DB keeps every rule of the Store contract that
// the reference store keeps (store/storetest).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := engine.Open("/data", engine.Options{FS: memfs.NewDisk().FS(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
}
