package vfs

import (
	"errors"
	"io"
	"os"
)

// linker is implemented by file systems that can give a file a second
// name (a hard link): a backup then costs no bytes for files that never
// change again.
type linker interface {
	Link(oldname, newname string) error
}

func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// Link links oldname to newname where fsys can (a linker; a WaitFS passes
// its own FS's), and says whether it did. A link that fails for any reason
// (another device, a file system without links) is not an error: the
// caller copies instead.
func Link(fsys FS, oldname, newname string) bool {
	if w, ok := fsys.(*WaitFS); ok {
		fsys = w.FS
	}
	l, ok := fsys.(linker)
	return ok && l.Link(oldname, newname) == nil
}

// CopyFile writes the first n bytes of src to the new file dst (n < 0:
// all of it) and fsyncs dst. dst must not exist: a copy never overwrites.
func CopyFile(fsys FS, src, dst string, n int64) (err error) {
	in, err := fsys.OpenFile(src, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fsys.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	copied, err := io.Copy(out, r)
	if err != nil {
		return err
	}
	if n >= 0 && copied != n {
		return errors.New("vfs: copy " + src + ": the file is shorter than the bytes asked for")
	}
	return out.Sync()
}

// SyncFile fsyncs the file name (a hard link's data, made durable under
// its new name too).
func SyncFile(fsys FS, name string) error {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
