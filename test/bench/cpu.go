package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuTimes is the CPU time (user+system, in seconds) used so far by this process
// (the manager and the harness) and by its kube-apiserver and etcd children, from
// /proc. It is empty where /proc is not available.
type cpuTimes map[string]float64

func readCPU() cpuTimes {
	out := cpuTimes{}
	if t, ok := procCPU("self"); ok {
		out["manager"] = t
	}
	self := strconv.Itoa(os.Getpid())
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
		switch {
		case strings.Contains(name, "kube-apiserver"):
			out["apiserver"] += cpuOf(string(raw))
		case strings.Contains(name, "etcd"):
			out["etcd"] += cpuOf(string(raw))
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

func procCPU(pid string) (float64, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, false
	}
	return cpuOf(string(raw)), true
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
