//go:build linux

package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A minimal io_uring (issue 41's experiment): just enough to submit one
// write linked to an fdatasync and wait for both, one syscall per record
// instead of two. Raw syscalls, no dependency: the experiment decides
// whether a library is worth taking on (docs/benchmarks.md, "fsync through
// io_uring").
const (
	sysIOURingSetup = 425
	sysIOURingEnter = 426

	iouringOffSQRing      = 0
	iouringOffSQEs        = 0x10000000
	iouringFeatSingleMmap = 1 << 0
	iouringEnterGetEvents = 1 << 0

	iouringOpWrite       = 23
	iouringOpFsync       = 3
	iouringFsyncDatasync = 1
	iosqeIOLink          = 1 << 2

	uringEntries = 4
	sqeBytes     = 64
	cqeBytes     = 16
)

// uringParams is struct io_uring_params; the two offset blocks are
// io_sqring_offsets and io_cqring_offsets, 40 bytes each.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sq                                                                     [10]uint32 // head tail mask entries flags dropped array resv1 user_addr(u64)
	cq                                                                     [10]uint32 // head tail mask entries overflow cqes flags resv1 user_addr(u64)
}

// uringSQE is struct io_uring_sqe (64 bytes).
type uringSQE struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len, opFlags  uint32
	userData      uint64
	_             [24]byte
}

// uring is one ring: its fd and the shared memory of its queues.
type uring struct {
	fd        int
	ring, sqe []byte
	p         uringParams
}

func newURing() (*uring, error) {
	u := &uring{}
	fd, _, errno := syscall.Syscall(sysIOURingSetup, uringEntries, uintptr(unsafe.Pointer(&u.p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	u.fd = int(fd)
	if u.p.features&iouringFeatSingleMmap == 0 {
		u.close()
		return nil, fmt.Errorf("io_uring: kernel lacks IORING_FEAT_SINGLE_MMAP")
	}
	size := max(int(u.p.sq[6])+int(u.p.sqEntries)*4, int(u.p.cq[5])+int(u.p.cqEntries)*cqeBytes)
	var err error
	if u.ring, err = syscall.Mmap(u.fd, iouringOffSQRing, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		u.close()
		return nil, fmt.Errorf("io_uring mmap ring: %w", err)
	}
	if u.sqe, err = syscall.Mmap(u.fd, iouringOffSQEs, int(u.p.sqEntries)*sqeBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		u.close()
		return nil, fmt.Errorf("io_uring mmap sqes: %w", err)
	}
	return u, nil
}

func (u *uring) u32(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&u.ring[off])) }

// push queues one SQE; the caller submits.
func (u *uring) push(e uringSQE) {
	tail := atomic.LoadUint32(u.u32(u.p.sq[1]))
	idx := tail & *u.u32(u.p.sq[2])
	*(*uringSQE)(unsafe.Pointer(&u.sqe[idx*sqeBytes])) = e
	*(*uint32)(unsafe.Pointer(&u.ring[u.p.sq[6]+idx*4])) = idx
	atomic.StoreUint32(u.u32(u.p.sq[1]), tail+1)
}

// writeSync writes buf at off in f and fdatasyncs f, linked, with one
// io_uring_enter that waits for both completions.
func (u *uring) writeSync(f *os.File, buf []byte, off int64) error {
	fd := int32(f.Fd())
	u.push(uringSQE{opcode: iouringOpWrite, flags: iosqeIOLink, fd: fd, off: uint64(off),
		addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf)), userData: 1})
	u.push(uringSQE{opcode: iouringOpFsync, fd: fd, opFlags: iouringFsyncDatasync, userData: 2})
	if err := u.enter(2); err != nil {
		return err
	}
	return u.reap(2, len(buf))
}

// enter submits what is queued and waits until n completions are there.
// A signal (the Go runtime preempts with them) can end the wait after the
// submission: the kernel then reports success with fewer completions,
// so it waits again, submitting nothing more.
func (u *uring) enter(n uint32) error {
	submit := uintptr(n)
	for u.ready() < n {
		_, _, errno := syscall.Syscall6(sysIOURingEnter, uintptr(u.fd), submit, uintptr(n), iouringEnterGetEvents, 0, 0)
		switch errno {
		case 0:
			submit = 0
		case syscall.EINTR:
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
	return nil
}

// ready is how many completions wait in the queue.
func (u *uring) ready() uint32 {
	return atomic.LoadUint32(u.u32(u.p.cq[1])) - atomic.LoadUint32(u.u32(u.p.cq[0]))
}

// reap consumes n completions: a short write or any negative result fails.
func (u *uring) reap(n, wrote int) error {
	var err error
	for range n {
		head := atomic.LoadUint32(u.u32(u.p.cq[0]))
		if head == atomic.LoadUint32(u.u32(u.p.cq[1])) {
			return fmt.Errorf("io_uring: %d completions missing", n)
		}
		off := u.p.cq[5] + (head&*u.u32(u.p.cq[2]))*cqeBytes
		user := *(*uint64)(unsafe.Pointer(&u.ring[off]))
		res := *(*int32)(unsafe.Pointer(&u.ring[off+8]))
		atomic.StoreUint32(u.u32(u.p.cq[0]), head+1)
		switch {
		case res < 0 && err == nil:
			err = fmt.Errorf("io_uring op %d: %w", user, syscall.Errno(-res))
		case user == 1 && int(res) != wrote && err == nil:
			err = fmt.Errorf("io_uring: short write %d of %d", res, wrote)
		}
	}
	return err
}

func (u *uring) close() error {
	if u.sqe != nil {
		syscall.Munmap(u.sqe)
	}
	if u.ring != nil {
		syscall.Munmap(u.ring)
	}
	return syscall.Close(u.fd)
}
