package check

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// The file systems under Dir (readonly.go, view.go): the read-only view refuses
// every write, the copy-on-write view keeps recovery's writes in memory,
// and Dir itself makes no call that could change the dir but its Lock.

// spyFS records every call that could change a file system, and refuses it.
type spyFS struct {
	vfs.FS
	mu     sync.Mutex
	writes []string
	locks  int
}

func (s *spyFS) record(op, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, op+" "+name)
	return errors.New("spy: a mutating call")
}

func (s *spyFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&writeFlags != 0 {
		return nil, s.record("open-for-writing", name)
	}
	f, err := s.FS.OpenFile(name, flag, perm)
	return spyFile{f, s, name}, err
}

func (s *spyFS) OpenDir(name string) (vfs.File, error) {
	f, err := s.FS.OpenDir(name)
	return spyFile{f, s, name}, err
}

func (s *spyFS) Remove(name string) error                  { return s.record("remove", name) }
func (s *spyFS) Rename(name, _ string) error               { return s.record("rename", name) }
func (s *spyFS) MkdirAll(name string, _ fs.FileMode) error { return s.record("mkdir", name) }
func (s *spyFS) Lock(name string) (io.Closer, error) {
	s.mu.Lock()
	s.locks++
	s.mu.Unlock()
	return s.FS.Lock(name)
}

type spyFile struct {
	vfs.File
	s    *spyFS
	name string
}

func (f spyFile) Write([]byte) (int, error) { return 0, f.s.record("write", f.name) }
func (f spyFile) Truncate(int64) error      { return f.s.record("truncate", f.name) }
func (f spyFile) Sync() error               { return f.s.record("sync", f.name) }

func TestCheck_MakesNoMutatingCallButTheLockEvenWhereAnOpenWouldWrite(t *testing.T) {
	f := newCheckFixture(t)
	// Where an open writes most: it cuts a torn tail (keeping the cut
	// bytes) and moves a damaged newest link aside.
	if err := os.Remove(f.wal("CLOSED")); err != nil {
		t.Fatal(err)
	}
	f.cutLastSegment(t, 3)
	flipByte(t, filepath.Join(f.dir, f.deltas[1].Name), middle)
	spy := &spyFS{FS: vfs.Default}
	rep, err := Dir(spy, f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spy.writes) != 0 || spy.locks != 1 {
		t.Fatalf("check made mutating calls %v and %d locks; want none and one", spy.writes, spy.locks)
	}
	if !rep.Loaded || len(problemsOf(rep, ProblemTornTail)) != 1 || !rep.Damaged() || rep.Recovery.FromCheckpoint != f.deltas[0].V {
		t.Fatalf("the open under check should cut the tail and fall back to %d: %+v", f.deltas[0].V, rep)
	}
}

func TestCheckView_WritesStayInMemoryAndReadsSeeThem(t *testing.T) {
	lower := memfs.New()
	for name, data := range map[string]string{"/d/a": "aaaa", "/d/b": "bbbb", "/d/sub/c": "cccc"} {
		if err := lower.MkdirAll("/d/sub", 0o750); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileSynced(lower, name, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	ro := readOnlyFS{lower}
	if _, err := ro.OpenFile("/d/a", os.O_WRONLY, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only open for writing: %v", err)
	}
	if err := ro.Remove("/d/a"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only remove: %v", err)
	}
	v := newViewFS(ro)
	f, err := v.OpenFile("/d/a", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("+"))
	f.Truncate(3)
	if err := vfs.WriteFileSynced(v, "/d/new", []byte("n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := v.Rename("/d/b", "/d/b2"); err != nil {
		t.Fatal(err)
	}
	if err := v.Remove("/d/sub/c"); err != nil {
		t.Fatal(err)
	}
	read := func(fsys vfs.FS, name string) string {
		b, err := vfs.ReadFile(fsys, name)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	names := func(fsys vfs.FS, dir string) []string {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	if got := read(v, "/d/a") + read(v, "/d/b2") + read(v, "/d/new"); got != "aaabbbbn" {
		t.Fatalf("the view reads %q", got)
	}
	if _, err := v.Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a renamed file is still in the view: %v", err)
	}
	if got := names(v, "/d"); !slices.Equal(got, []string{"a", "b2", "new", "sub"}) || len(names(v, "/d/sub")) != 0 {
		t.Fatalf("the view lists %v and %v", got, names(v, "/d/sub"))
	}
	if got := read(lower, "/d/a") + read(lower, "/d/b") + read(lower, "/d/sub/c"); got != "aaaabbbbcccc" || len(names(lower, "/d")) != 3 {
		t.Fatalf("the view changed what lies below: %q, %v", got, names(lower, "/d"))
	}
}
