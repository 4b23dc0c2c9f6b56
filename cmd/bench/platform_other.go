//go:build !linux

package main

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync falls back to a full fsync where fdatasync(2) is not offered.
func fdatasync(f *os.File) error { return f.Sync() }

// dropCache is posix_fadvise's, which package syscall offers on Linux
// only: elsewhere the cold cases are not run.
func dropCache(string) error { return errors.ErrUnsupported }

// fsType is only known on Linux (statfs f_type).
func fsType(string) string { return "unknown" }

// quiesce is a no-op where sync(2) is not offered through package syscall.
func quiesce() {}

// childProcAttr sets nothing here: Pdeathsig is Linux's; elsewhere the
// crashloop suite kills its idemd on every way out it controls.
func childProcAttr() *syscall.SysProcAttr { return nil }
