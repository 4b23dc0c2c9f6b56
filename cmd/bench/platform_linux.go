//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
)

// fdatasync flushes a file's data and the metadata needed to read it back
// (its size), skipping timestamps: the cheapest durable append.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// dropCache asks the kernel to drop path's pages from the page cache
// (posix_fadvise DONTNEED), so that the next read of them goes to the
// disk: the cold case of a value-log read.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const fadvDontNeed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// Magic numbers of statfs(2) f_type, for the file systems a benchmark is
// likely to land on.
var fsNames = map[int64]string{
	0xEF53:     "ext4", // ext2/3/4 share the magic
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0x794C7630: "overlay",
	0x2FC12FC1: "zfs",
	0xF2F52010: "f2fs",
	0x6969:     "nfs",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x858458F6: "ramfs",
	0x5346544E: "ntfs",
	0x4D44:     "vfat",
}

// fsType names the file system holding dir, or "0x…" for an unknown one.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	t := int64(st.Type) // int32 on some architectures
	if name, ok := fsNames[t]; ok {
		return name
	}
	return fmt.Sprintf("0x%x", t)
}

// quiesce writes back every file system's dirty pages before a case starts,
// so that writeback left over from the previous case (or from building this
// binary) does not land inside the next measurement.
func quiesce() { syscall.Sync() }

// childProcAttr makes a child process die with the bench: an interrupted
// or timed-out run must not leave an idemd behind (crashloop).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
