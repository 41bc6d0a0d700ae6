package lab

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The guests' control channel is their serial console: the init script
// prints "@@RB EVENT key=value ..." lines among the kernel's messages.
const markerPrefix = "@@RB "

// marker is one parsed progress line.
type marker struct {
	Event string
	Args  map[string]string
}

var keyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// parseMarker finds a marker anywhere in a line (kernel messages can share
// a line with the script's output). A value runs until the next key=, so
// values may hold spaces ("portlist=rdma 20049,tcp 2049").
func parseMarker(line string) (marker, bool) {
	i := strings.Index(line, markerPrefix)
	if i < 0 {
		return marker{}, false
	}
	fields := strings.Fields(line[i+len(markerPrefix):])
	if len(fields) == 0 {
		return marker{}, false
	}
	m := marker{Event: fields[0], Args: map[string]string{}}
	key := ""
	for _, f := range fields[1:] {
		if keyRe.MatchString(f) {
			kv := strings.SplitN(f, "=", 2)
			key = kv[0]
			m.Args[key] = kv[1]
			continue
		}
		if key != "" {
			m.Args[key] += " " + f
		}
	}
	return m, true
}

func (m marker) float(key string) float64 {
	v, _ := strconv.ParseFloat(m.Args[key], 64)
	return v
}

func (m marker) int(key string) int {
	v, _ := strconv.Atoi(m.Args[key])
	return v
}

// netemFailed finds a host's NETEM_FAIL marker: tc could not shape its
// test link as the test asks.
func netemFailed(console string) (string, bool) {
	for _, l := range strings.Split(console, "\n") {
		if m, ok := parseMarker(l); ok && m.Event == "NETEM_FAIL" {
			return m.Args["msg"], true
		}
	}
	return "", false
}

// netemError is a link the lab could not shape: the operator asked for
// netem on a kernel built without it (CONFIG_NET_SCH_NETEM), or on a
// host without tc. Never the patch's fault.
func netemError(role, msg string) error {
	return &InfraError{Host: role, Op: "netem", Err: fmt.Errorf("tc could not shape the test link (a lab kernel needs CONFIG_NET_SCHED and CONFIG_NET_SCH_NETEM): %s", msg)}
}
