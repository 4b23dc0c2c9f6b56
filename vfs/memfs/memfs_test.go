package memfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/idemdb/idem/vfs"
)

func write(t *testing.T, m vfs.FS, name string, data []byte, sync bool) vfs.File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func content(t *testing.T, m vfs.FS, name string) ([]byte, bool) {
	t.Helper()
	b, err := vfs.ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func TestCrash_KeepsSyncedDataAndSyncedEntriesOnly(t *testing.T) {
	m := New()
	if err := vfs.MkdirAllSynced(m, "/d", 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/durable", []byte("abc"), true)
	write(t, m, "/d/unsynced-data", []byte("xyz"), false)
	if err := vfs.SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	f := write(t, m, "/d/durable", []byte("def"), false) // appended, not synced
	f.Close()
	write(t, m, "/d/no-dir-sync", []byte("123"), true) // data synced, entry not

	r := m.Recover(DropUnsynced)
	if b, ok := content(t, r, "/d/durable"); !ok || string(b) != "abc" {
		t.Fatalf("durable = %q %v, want abc", b, ok)
	}
	if b, ok := content(t, r, "/d/unsynced-data"); !ok || len(b) != 0 {
		t.Fatalf("unsynced-data = %q %v, want an empty file", b, ok)
	}
	if _, ok := content(t, r, "/d/no-dir-sync"); ok {
		t.Fatal("a file whose directory was never synced survived the crash")
	}
	if b, _ := content(t, m.Recover(KeepAll), "/d/durable"); string(b) != "abcdef" {
		t.Fatalf("KeepAll: %q, want abcdef", b)
	}
	if b, _ := content(t, m.Recover(KeepUnsynced(2)), "/d/durable"); string(b) != "abcde" {
		t.Fatalf("KeepUnsynced(2): %q, want abcde", b)
	}
}

// TestCrash_AnOverwriteIsTornOverTheDurableBytes: bytes written over a
// synced file's (a preallocated WAL segment's zeros) survive a crash as a
// prefix laid over the durable bytes, which show where nothing was kept;
// a later sync makes exactly the overwrite durable.
func TestCrash_AnOverwriteIsTornOverTheDurableBytes(t *testing.T) {
	m := New()
	if err := vfs.MkdirAllSynced(m, "/d", 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/seg", []byte("0000000000"), true)
	if err := vfs.SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/d/seg", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ab")); err != nil { // synced below
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("cdef")); err != nil { // in flight at the crash
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tear Tear
		want string
	}{
		{DropUnsynced, "ab00000000"},
		{KeepUnsynced(2), "abcd000000"},
		{KeepAll, "abcdef0000"},
	} {
		if b, _ := content(t, m.Recover(tc.tear), "/d/seg"); string(b) != tc.want {
			t.Fatalf("after the crash: %q, want %q", b, tc.want)
		}
	}
}

func TestCrash_RenameAndRemoveNeedADirectorySync(t *testing.T) {
	m := New()
	write(t, m, "/a", []byte("1"), true)
	write(t, m, "/gone", []byte("2"), true)
	if err := vfs.SyncDir(m, "/"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/gone"); err != nil {
		t.Fatal(err)
	}
	r := m.Recover(nil)
	if _, ok := content(t, r, "/a"); !ok {
		t.Fatal("an unsynced rename took effect")
	}
	if _, ok := content(t, r, "/b"); ok {
		t.Fatal("an unsynced rename's new name survived")
	}
	if _, ok := content(t, r, "/gone"); !ok {
		t.Fatal("an unsynced removal took effect")
	}

	m2 := r
	if err := m2.Rename("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.SyncDir(m2, "/"); err != nil {
		t.Fatal(err)
	}
	r2 := m2.Recover(nil)
	if _, ok := content(t, r2, "/a"); ok {
		t.Fatal("old name survived a synced rename")
	}
	if b, ok := content(t, r2, "/b"); !ok || string(b) != "1" {
		t.Fatalf("/b = %q %v after a synced rename", b, ok)
	}
}

func TestCrash_NewDirectoryNeedsItsParentSynced(t *testing.T) {
	m := New()
	if err := m.MkdirAll("/x/y", 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/x/y/f", []byte("1"), true)
	if err := vfs.SyncDir(m, "/x/y"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Recover(nil).Stat("/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(/x) after crash = %v, want not exist (parent never synced)", err)
	}
	m = New()
	if err := vfs.MkdirAllSynced(m, "/x/y", 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/x/y/f", []byte("1"), true)
	if err := vfs.SyncDir(m, "/x/y"); err != nil {
		t.Fatal(err)
	}
	if b, ok := content(t, m.Recover(nil), "/x/y/f"); !ok || string(b) != "1" {
		t.Fatalf("/x/y/f = %q %v", b, ok)
	}
}

func TestCrash_EveryCallAfterItFails(t *testing.T) {
	m := New()
	f := write(t, m, "/f", []byte("1"), true)
	if err := vfs.SyncDir(m, "/"); err != nil {
		t.Fatal(err)
	}
	m.CrashAt(2)
	if _, err := f.Write([]byte("2")); err != nil {
		t.Fatalf("first call after CrashAt(2): %v", err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("second call = %v, want ErrCrashed", err)
	}
	if _, err := f.Write([]byte("3")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("later write = %v, want ErrCrashed", err)
	}
	if _, err := m.Stat("/f"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("later stat = %v, want ErrCrashed", err)
	}
	// The image is the state just before the crashing call: the write of
	// "2" happened, its sync did not.
	if b, _ := content(t, m.Recover(KeepAll), "/f"); string(b) != "12" {
		t.Fatalf("KeepAll image = %q, want 12", b)
	}
	if b, _ := content(t, m.Recover(nil), "/f"); string(b) != "1" {
		t.Fatalf("durable image = %q, want 1", b)
	}
}

func TestCapacity_WritesWhatFitsThenENOSPC(t *testing.T) {
	m := New()
	m.SetCapacity(10)
	f := write(t, m, "/f", []byte("12345678"), false)
	n, err := f.Write([]byte("abcd"))
	if n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %d, %v; want 2, ENOSPC", n, err)
	}
	if err := m.Remove("/f"); err != nil {
		t.Fatal(err)
	}
	if m.Used() != 0 {
		t.Fatalf("Used after remove = %d", m.Used())
	}
	write(t, m, "/g", []byte("0123456789"), false)
}

func TestZeroFill_KeepsWholeBlocksAndZeroesTheRest(t *testing.T) {
	tear := ZeroFill(700, 512)
	got := tear("/f", 100, bytes.Repeat([]byte{7}, 1000))
	if len(got) != 1000 {
		t.Fatalf("len = %d, want the written length", len(got))
	}
	// Offsets 100..512 survive (the block ending at 512), the rest is zero.
	for i, b := range got {
		want := byte(0)
		if 100+i < 512 {
			want = 7
		}
		if b != want {
			t.Fatalf("byte at file offset %d = %d, want %d", 100+i, b, want)
		}
	}
}

func TestLock_IsExclusiveAndNotInheritedByRecover(t *testing.T) {
	m := New()
	l, err := m.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/LOCK"); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	if err := vfs.SyncDir(m, "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Recover(nil).Lock("/LOCK"); err != nil {
		t.Fatalf("Lock after recovery: %v", err)
	}
	l.Close()
}
