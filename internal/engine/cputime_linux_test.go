//go:build linux

package engine

import (
	"runtime"
	"syscall"
	"testing"
)

// cpuMeter reports the CPU time the benchmark's own thread spent per operation
// ("cpu-ns/op"), which stays meaningful on a loaded machine where wall time does not.
// Background GC work on other threads is not included.
type cpuMeter struct{ start int64 }

func startCPU() cpuMeter {
	runtime.LockOSThread()
	return cpuMeter{threadCPU()}
}

func (m cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(threadCPU()-m.start)/float64(b.N), "cpu-ns/op")
	runtime.UnlockOSThread()
}

func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
