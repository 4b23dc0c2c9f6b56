package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machine describes the computer a run measured, for the report.
type machine struct {
	CPU    string
	Cores  int
	RAM    string
	Kernel string
	OS     string
}

func describeMachine() machine {
	m := machine{CPU: "unknown", Cores: runtime.NumCPU(), RAM: "unknown", Kernel: "unknown", OS: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(fields[1], 64); err == nil {
					m.RAM = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
		if t, err := os.ReadFile("/proc/sys/kernel/ostype"); err == nil {
			m.Kernel = strings.TrimSpace(string(t)) + " " + m.Kernel
		}
	}
	return m
}

// loadAverage is the 1-minute load average (Linux).
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}
