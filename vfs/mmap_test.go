package vfs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// MapFile maps a file of the OS's file system to its exact bytes (through
// a WaitFS too), and declines, with no error, what it cannot map: an
// empty file, another file system. A missing file is an error.
func TestMapFile_MapsTheOSFilesBytesAndDeclinesTheRest(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("0123456789abcdef"), 5000)
	if err := os.WriteFile(name, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fsys := range []vfs.FS{vfs.Default, vfs.NewWaitFS(vfs.Default, nil)} {
		got, ok, err := vfs.MapFile(fsys, name)
		if runtime.GOOS != "linux" {
			if ok || err != nil {
				t.Fatalf("MapFile on %s = %v, %v; want declined", runtime.GOOS, ok, err)
			}
			continue
		}
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Fatalf("MapFile = %d bytes, %v, %v; want the file's %d bytes", len(got), ok, err, len(want))
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := vfs.MapFile(vfs.Default, empty); ok || err != nil {
		t.Fatalf("an empty file: %v, %v; want declined", ok, err)
	}
	if _, ok, err := vfs.MapFile(vfs.Default, filepath.Join(dir, "missing")); ok || (err == nil && runtime.GOOS == "linux") {
		t.Fatalf("a missing file: %v, %v; want an error", ok, err)
	}
	if _, ok, err := vfs.MapFile(memfs.NewDisk().FS(), "/f"); ok || err != nil {
		t.Fatalf("memfs: %v, %v; want declined", ok, err)
	}
}
