package agent

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Fingerprint detects this machine's capacity and attributes from /proc.
// CPU capacity is cores x clock MHz, as Nomad counts it; when /proc/cpuinfo
// has no clock (some VMs), 1000 MHz a core is assumed and said so in the
// attribute cpu.mhz_source.
func Fingerprint() (spec.Resources, map[string]string) {
	attrs := map[string]string{
		"os":        runtime.GOOS,
		"arch":      runtime.GOARCH,
		"cpu.count": strconv.Itoa(runtime.NumCPU()),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		attrs["kernel"] = strings.TrimSpace(string(b))
	}
	if h, err := os.Hostname(); err == nil {
		attrs["hostname"] = h
	}
	mhz, src := cpuMHz()
	attrs["cpu.mhz"] = strconv.Itoa(mhz)
	attrs["cpu.mhz_source"] = src
	res := spec.Resources{CPU: mhz * runtime.NumCPU(), MemoryMB: memTotalMB()}
	return res, attrs
}

func cpuMHz() (int, string) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 1000, "assumed"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && x > 0 {
				return int(x), "/proc/cpuinfo"
			}
		}
	}
	return 1000, "assumed"
}

func memTotalMB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(fields[1])
			return kb / 1024
		}
	}
	return 0
}
