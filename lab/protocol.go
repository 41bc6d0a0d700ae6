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

// parseMarker reads a marker that starts its line. The scripts print
// each one after a newline of its own, so a kernel message that shares
// the line cannot hide it; text before "@@RB " is never a marker, or a
// peer's bytes printed in a line (a server's log of what a client sent)
// could speak for the host. A value runs until the next key=, so values
// may hold spaces ("portlist=rdma 20049,tcp 2049").
func parseMarker(line string) (marker, bool) {
	if !strings.HasPrefix(line, markerPrefix) {
		return marker{}, false
	}
	fields := strings.Fields(line[len(markerPrefix):])
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
	p := newProtocol("server")
	for _, l := range strings.Split(console, "\n") {
		if m, ok := parseMarker(l); ok && p.accept(m) && m.Event == "NETEM_FAIL" {
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

// errInvalidDone is the failure of a client whose word to the server
// at its end (labtest.sh's server_wait) was none of the protocol's.
const errInvalidDone = "the client told the server something other than ok, fail or poweroff when done"

// protocolSteps are the events each side's scripts print (init.sh,
// labtest.sh), by the step of the test they belong to: a side goes
// through its steps in order, and each event may come only in its own
// step. Anything else on a console (an unknown event, an event of the
// other side, one of an earlier step, a second BOOTED) is not the
// scripts speaking: a kernel printing markers, or a peer's bytes echoed.
var protocolSteps = map[string]map[string]int{
	"server": {
		"BOOTED": 0, "SELFTEST_MISSING": 1, "NET_UP": 1, "SSHD_UP": 1, "SSHD_FAIL": 1, "IDLE": 1,
		"NETEM": 2, "NETEM_FAIL": 2, "MODE_FAIL": 2, "RDMA_UP": 2, "RDMA_FAIL": 2,
		"RPCBIND_FAIL": 3, "EXPORT_FAIL": 3, "MOUNTD_FAIL": 3, "PRESSURE_FAIL": 3, "NFSD_FAIL": 3,
		"PORTLIST_FAIL": 3, "PRESSURE_SRV": 3, "NFSD_READY": 3,
		"STIME": 4, "SLOOP": 4, "DRIVE_FAIL": 4, "BOUNCED": 4,
		"CLIENT_DONE": 5,
		"SRVCMP":      6, "SRVSTAT": 6, "SRVIO": 6, "SVCRDMA": 6, "SRVCONN": 6,
		"NETEM_STATS": 7, "MEM": 7,
		"POWEROFF": 8,
	},
	"client": {
		"BOOTED": 0, "SELFTEST_MISSING": 1, "NET_UP": 1, "SSHD_UP": 1, "SSHD_FAIL": 1, "IDLE": 1,
		"NETEM": 2, "NETEM_FAIL": 2, "MODE_FAIL": 2, "RDMA_UP": 2, "RDMA_FAIL": 2,
		"STATD_FAIL": 3, "MOUNT_MSG": 3, "MOUNTED": 3, "TRANSPORT": 3, "MOUNT_FAIL": 3,
		"RESULT": 4, "FIO": 4, "FIO_MSG": 4, "FIO_FAIL": 4, "PRESSURE_FAIL": 4, "HANG_SYNC": 4, "HANG_ESCAPED": 4,
		"FSTEST": 4, "FSTEST_LOG": 4, "FSTESTS_FAIL": 4,
		"SUMMARY": 5,
		"MSTAT":   6, "RPCSTAT": 6, "UMOUNT_FAIL": 6,
		"NETEM_STATS": 7, "MEM": 7,
		"POWEROFF": 8,
	},
}

// protocolOnce are the events a side prints at most once.
var protocolOnce = map[string]bool{
	"BOOTED": true, "NET_UP": true, "RDMA_UP": true, "NETEM": true, "NETEM_FAIL": true, "NFSD_READY": true,
	"MOUNTED": true, "TRANSPORT": true, "CLIENT_DONE": true, "SUMMARY": true, "SRVIO": true, "SRVSTAT": true,
	"SVCRDMA": true, "SRVCONN": true, "FSTESTS_FAIL": true, "SLOOP": true, "DRIVE_FAIL": true, "RPCSTAT": true, "MEM": true, "POWEROFF": true, "NETEM_STATS": true,
}

// protocolLate are events printed by a background task of their step
// (server_bounce), which may come while the side has moved on.
var protocolLate = map[string]bool{"BOUNCED": true}

// protocol follows one side's markers through its steps.
type protocol struct {
	role string
	step int
	seen map[string]bool
	// violation is the first marker the side may not send where it came,
	// "" while there was none; every marker after it is refused.
	violation string
}

func newProtocol(role string) *protocol {
	return &protocol{role: role, seen: map[string]bool{}}
}

// accept says whether m may come from the side now, and records it.
func (p *protocol) accept(m marker) bool {
	if p.violation != "" {
		return false
	}
	step, known := protocolSteps[p.role][m.Event]
	switch {
	case !known:
		p.violation = fmt.Sprintf("the %s printed a marker it never sends: %s", p.role, m.Event)
	case protocolOnce[m.Event] && p.seen[m.Event]:
		p.violation = fmt.Sprintf("the %s printed %s twice", p.role, m.Event)
	case step < p.step && !(protocolLate[m.Event] && p.step < protocolSteps[p.role]["POWEROFF"]):
		p.violation = fmt.Sprintf("the %s printed %s after a later step of the test", p.role, m.Event)
	}
	if p.violation != "" {
		return false
	}
	p.seen[m.Event] = true
	p.step = max(p.step, step)
	return true
}

// refuse records a marker the side's protocol allows in its step that
// still is not the scripts' (an fstests result out of its group's
// order): the side's violation, like any other.
func (p *protocol) refuse(why string) {
	if p.violation == "" {
		p.violation = fmt.Sprintf("the %s printed %s", p.role, why)
	}
}

// protocolError charges a protocol violation to the kernel under test:
// role is the side whose console broke the protocol; with a trusted peer
// the candidate's side answers for it whichever console it was (only
// the candidate can make the trusted side's console say what its
// scripts do not), never the lab.
func protocolError(k Kernel, role, violation, consoleTail string) *BootError {
	host := role
	if k.Peer != nil {
		host = k.Side
	}
	return &BootError{Host: host, Phase: "protocol", Err: fmt.Errorf("%s: the run's markers are not the lab scripts' (%s's console)", violation, role), Console: consoleTail}
}
