package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuTimes is the CPU time (in seconds) used so far by this process (the manager and
// the harness) and by its kube-apiserver and etcd children, from /proc: the sum of
// their threads' run time in nanoseconds where the kernel keeps it (schedstat), else
// user+system time in clock ticks of 10 ms, too coarse for a window of ten turns. It
// is empty where /proc is not available.
type cpuTimes map[string]float64

func readCPU() cpuTimes {
	out := cpuTimes{}
	self := strconv.Itoa(os.Getpid())
	if t, ok := procCPU(self); ok {
		out["manager"] = t
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		name, ppid, ok := parseStat(string(raw))
		if !ok || ppid != self {
			continue
		}
		pid := filepath.Base(d)
		t, ok := procCPU(pid)
		if !ok {
			continue
		}
		switch {
		case strings.Contains(name, "kube-apiserver"):
			out["apiserver"] += t
		case strings.Contains(name, "etcd"):
			out["etcd"] += t
		}
	}
	return out
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

// procCPU is the CPU time of process pid: its threads' run time where schedstat is
// kept, else its user+system time.
func procCPU(pid string) (float64, bool) {
	if t, ok := schedCPU(pid); ok {
		return t, true
	}
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, false
	}
	return cpuOf(string(raw)), true
}

// schedCPU sums the run time (the first field of schedstat, in nanoseconds) of the
// threads of process pid. The Go processes measured here keep their threads, so no
// time leaves with an exited thread between two readings.
func schedCPU(pid string) (float64, bool) {
	tasks, err := filepath.Glob(filepath.Join("/proc", pid, "task", "[0-9]*", "schedstat"))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var ns float64
	for _, f := range tasks {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has just exited
		}
		fields := strings.Fields(string(raw))
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false
		}
		ns += v
	}
	return ns / 1e9, true
}

// parseStat returns the command name and parent pid of a /proc/<pid>/stat line.
func parseStat(s string) (name, ppid string, ok bool) {
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", "", false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 2 {
		return "", "", false
	}
	return s[open+1 : close], f[1], true
}

// cpuOf returns utime+stime in seconds (fields 14 and 15, in clock ticks of 1/100 s).
func cpuOf(s string) float64 {
	close := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[close+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}
