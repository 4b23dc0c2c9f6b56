//go:build !linux

package main

import (
	"errors"
	"os"
)

// uring exists on Linux only; elsewhere the uring suite reports that it
// cannot run.
type uring struct{}

func newURing() (*uring, error) { return nil, errors.ErrUnsupported }

func (*uring) writeSync(*os.File, []byte, int64) error { return errors.ErrUnsupported }

func (*uring) close() error { return nil }
