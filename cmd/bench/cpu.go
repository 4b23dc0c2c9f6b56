package main

import (
	"syscall"
	"time"
)

// The process's CPU time over a case's measured window, per call: what a
// request costs the machine, apart from how fast the disk happened to be.
// On this bench's 2-core machines both sides of most comparisons are bound
// by CPU, so their rates stand roughly in the inverse ratio of this figure;
// and it moves far less than a rate from one run to the next, because a
// disk that drifts (a slower fsync) changes the rate, not the CPU a request
// takes. It counts every goroutine of the process (the load generator's
// included), and the kernel's work on the process's behalf (its syscalls,
// loopback networking), not other processes': a case whose server is
// PostgreSQL reports none (Loop.ServerOutside).

// processCPU is the CPU time the process has used so far (user and
// system), or -1 when the platform does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// usage is the process's CPU so far, split, and its minor page faults:
// an open's system time is mostly its first touches of fresh memory,
// which on a VM cost as much as the host's memory happens to (the
// replay's figures below).
type usage struct {
	user, sys time.Duration
	faults    int64
}

func processUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()), faults: ru.Minflt}
}

// setUsage adds what the process used between from and to to r.
func setUsage(r *Result, from, to usage) {
	r.Set("user_seconds", round((to.user-from.user).Seconds(), 3))
	r.Set("sys_seconds", round((to.sys-from.sys).Seconds(), 3))
	r.Set("minor_faults", to.faults-from.faults)
}

// setCPU adds the window's CPU figures to r: µs of process CPU per op and
// the cores it kept busy on average.
func setCPU(r *Result, m Measured) {
	if m.CPUNanos < 0 || m.Items == 0 || m.Seconds <= 0 {
		return
	}
	r.Set("cpu_us_per_op", round(float64(m.CPUNanos)/float64(m.Items)/1e3, 1))
	r.Set("cpu_cores", round(float64(m.CPUNanos)/(m.Seconds*1e9), 2))
}
