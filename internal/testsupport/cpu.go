package testsupport

import (
	"syscall"
	"testing"
	"time"
)

// ReportCPU reports the process's CPU time per op (cpu-ns/op) of the
// benchmark from the call to its end. On a shared, loaded machine ns/op is
// the wall clock, which other processes stretch several times over; the
// CPU an op takes moves far less (cmd/bench's cpu_us_per_op, for the same
// reason). Every goroutine of the process counts, background ones (a WAL
// writer, the GC) included, and so does the kernel's work on its behalf.
func ReportCPU(b *testing.B) {
	start := processCPU()
	b.Cleanup(func() {
		if start >= 0 && b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	})
}

// processCPU is the CPU time (user and system) the process has used so
// far, or -1 when the platform does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
