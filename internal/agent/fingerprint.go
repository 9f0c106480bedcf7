package agent

import (
	"bufio"
	"maps"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/spec"
)

// Fingerprint detects this machine's capacity and attributes, under
// Nomad's names and with Nomad's values (spec.AttrKernelName...). CPU
// capacity is cores x clock MHz, as Nomad counts it; when /proc/cpuinfo
// has no clock (some VMs), 1000 MHz a core is assumed and said so in
// spec.AttrCPUFrequencySource.
func Fingerprint() (spec.Resources, map[string]string) {
	cores := runtime.NumCPU()
	mhz, src := cpuMHz()
	mem := memTotalBytes()
	attrs := map[string]string{
		spec.AttrKernelName:         runtime.GOOS,
		spec.AttrCPUArch:            runtime.GOARCH,
		spec.AttrCPUNumCores:        strconv.Itoa(cores),
		spec.AttrCPUFrequency:       strconv.Itoa(mhz),
		spec.AttrCPUFrequencySource: src,
		spec.AttrCPUTotalCompute:    strconv.Itoa(mhz * cores),
		spec.AttrMemoryTotalBytes:   strconv.FormatUint(mem, 10),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		attrs[spec.AttrKernelVersion] = strings.TrimSpace(string(b))
	}
	if h, err := os.Hostname(); err == nil {
		attrs[spec.AttrHostname] = h
	}
	// A container image may have no os-release: then the node has no
	// os.name, rather than a guess.
	for k, v := range osRelease("/etc/os-release") {
		attrs[k] = v
	}
	res := spec.Resources{CPU: mhz * cores, MemoryMB: int(mem >> 20)}
	return res, attrs
}

// osRelease reads the distribution's ID and VERSION_ID from an
// os-release file, as spec.AttrOSName and spec.AttrOSVersion: "ubuntu"
// and "24.04", as Nomad's. Values may be quoted.
func osRelease(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch {
		case k == "ID" && v != "":
			out[spec.AttrOSName] = v
		case k == "VERSION_ID" && v != "":
			out[spec.AttrOSVersion] = v
		}
	}
	return out
}

// fingerprint is Fingerprint plus what depends on this agent's
// configuration: the disk its data directory's file system offers, and the
// address the node's ports are reached at (spec.NodeIPAttribute).
func (a *Agent) fingerprint() (spec.Resources, map[string]string) {
	res, attrs := Fingerprint()
	res.DiskMB = diskFreeMB(a.cfg.DataDir)
	attrs[spec.NodeIPAttribute] = nodeIP(a.cfg.NetworkIP, a.cfg.Address)
	for _, d := range a.drivers {
		maps.Copy(attrs, d.Info().Attributes)
	}
	if a.net != nil {
		for _, m := range a.net.Modes() {
			attrs[spec.NetworkModeAttribute(m)] = "true"
		}
	}
	return res, attrs
}

// diskFreeMB is the space free to unprivileged users on the file system
// holding dir, in MB: what tasks writing to their alloc directories can
// use (root's reserved blocks are not theirs). 0 when it cannot be read.
func diskFreeMB(dir string) int {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0
	}
	return int(st.Bavail * uint64(st.Bsize) >> 20)
}

// nodeIP is the address the node's ports are reserved on: the operator's
// explicit choice; else the host of the agent's advertised HTTP address
// when that is an IP (the address the servers already reach it at), but
// not an unspecified one such as 0.0.0.0; else the first IPv4 address of
// an interface that is up and not loopback; else 127.0.0.1.
func nodeIP(explicit, advertised string) string {
	if explicit != "" {
		return explicit
	}
	if u, err := url.Parse(advertised); err == nil {
		if ip := net.ParseIP(u.Hostname()); ip != nil && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	if ip := firstInterfaceIPv4(); ip != "" {
		return ip
	}
	return "127.0.0.1"
}

// firstInterfaceIPv4 is the first IPv4 address of an interface that is up
// and not loopback, in the kernel's interface order; "" if there is none.
func firstInterfaceIPv4() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String()
			}
		}
	}
	return ""
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

// memTotalBytes is the machine's memory (MemTotal), in bytes; 0 when
// /proc/meminfo cannot be read.
func memTotalBytes() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
