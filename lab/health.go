package lab

import (
	"regexp"
	"strconv"
	"strings"
)

// Health is the transport's own account of one boot's test, from the
// NFS client's mountstats and RPC totals and the server's RPC totals:
// what users hit even when throughput holds (the seed report's hung
// drain came with a slowdown; a later RDMA/rw bug showed as 71 % of RPCs
// retransmitted). Every counter is zero on a healthy boot.
type Health struct {
	// Reported: the guests printed their counts (a boot that crashed or
	// an older image did not).
	Reported bool `json:"reported"`
	// Retrans counts RPCs the client sent again: the test mount's per-op
	// transmissions less its operations, or the client's RPC total where
	// mountstats was missing.
	Retrans int `json:"retrans"`
	// Timeouts are the mount's RPC major timeouts.
	Timeouts int `json:"timeouts"`
	// Reconnects are the mount transport's connects after the first.
	Reconnects int `json:"reconnects"`
	// BadXIDs are replies that matched no outstanding request.
	BadXIDs int `json:"bad_xids"`
	// BadReplies are RPC/RDMA replies the client could not parse (rdma
	// transports only). Its neighbour, failed_marshal_count, is not one:
	// it counts calls put back for want of a free MR or buffer, and read
	// 5 on a healthy 6.12 boot.
	BadReplies int `json:"bad_replies"`
	// ServerBadCalls are calls the server could not decode or refused.
	ServerBadCalls int `json:"server_bad_calls"`
	// SQFull counts a provider's refusals of a Send WR because its Send
	// Queue was full (rxe's "post_one_send: send queue full", printed
	// rate-limited, so a count of at least the refusals), on either host:
	// the ULP posted more than it sized the queue for, the seed
	// regression's mechanism. CQFull counts completions dropped because
	// the completion queue was full (rxe's "rxe_cq_post: queue full").
	SQFull int `json:"sq_full,omitempty"`
	CQFull int `json:"cq_full,omitempty"`
	// Ops (the mount's RPCs) and Sends (its transport's) say how much
	// traffic the counts are out of.
	Ops   int `json:"ops"`
	Sends int `json:"sends"`
	// WriteChunks and ReadChunks are the client's RPC/RDMA Write chunk
	// segments (READ replies placed by RDMA Write) and Read chunks
	// (WRITE payloads pulled by RDMA Read): proof the test took the
	// chunk paths. SQStarve is how often the server's Sends waited for
	// Send Queue space (svcrdma's rdma_stat_sq_starve): a healthy server
	// under pressure waits. Not faults: what the test reached.
	WriteChunks int `json:"write_chunks,omitempty"`
	ReadChunks  int `json:"read_chunks,omitempty"`
	SQStarve    int `json:"sq_starve,omitempty"`
}

// Kernel messages that are transport faults whatever the throughput.
var (
	sqFullRe = regexp.MustCompile(`post_one_send: send queue full`)
	cqFullRe = regexp.MustCompile(`rxe_cq_post: queue full`)
)

// Counters are h's counts by the names reports decides on.
func (h Health) Counters() map[string]int {
	if !h.Reported {
		return nil
	}
	return map[string]int{
		"retrans": h.Retrans, "timeouts": h.Timeouts, "reconnects": h.Reconnects,
		"bad_xids": h.BadXIDs, "bad_replies": h.BadReplies, "server_bad_calls": h.ServerBadCalls,
		"sq_full": h.SQFull, "cq_full": h.CQFull,
		"write_chunks": h.WriteChunks, "read_chunks": h.ReadChunks, "sq_starve": h.SQStarve,
	}
}

// Faults is the sum of h's fault counts: 0 on a healthy boot.
func (h Health) Faults() int {
	return h.Retrans + h.Timeouts + h.Reconnects + h.BadXIDs + h.BadReplies + h.ServerBadCalls + h.SQFull + h.CQFull
}

// healthOf reads the health markers of both consoles (labtest.sh's
// client_health and server_health). With the kernel under test on the
// client (clientTrusted false) its counts are only evidence against it:
// the trusted server's own view of the client (requests it sent again,
// RDMA connections it asked for) stands wherever it is the higher, and
// only the server's report makes the counts reported.
func healthOf(clientConsole, serverConsole string, clientTrusted bool) Health {
	h := clientHealth(clientConsole)
	var srvSeen bool
	var srvRetrans, srvReconnects int
	for _, l := range strings.Split(serverConsole, "\n") {
		kernelFaults(&h, l)
		m, ok := parseMarker(l)
		switch {
		case !ok:
		case m.Event == "SRVSTAT":
			srvSeen = true
			h.ServerBadCalls = m.int("badcalls")
		case m.Event == "SVCRDMA":
			h.SQStarve = m.int("sq_starve")
		case m.Event == "SRVCONN":
			// Replies nfsd's reply cache gave again are requests the
			// client sent again; an RDMA connection asked for once the
			// test loop had started is a reconnect.
			srvRetrans, srvReconnects = m.int("rc_hits"), m.int("reconnects")
		}
	}
	if !clientTrusted {
		h.Reported = srvSeen
		h.Retrans, h.Reconnects = max(h.Retrans, srvRetrans), max(h.Reconnects, srvReconnects)
	}
	return h
}

// clientHealth reads the client's health markers and the faults its
// kernel printed.
func clientHealth(clientConsole string) Health {
	var h Health
	var opsSeen, rpcSeen, xprtSeen bool
	rpcRetrans := 0
	for _, l := range strings.Split(clientConsole, "\n") {
		kernelFaults(&h, l)
		m, ok := parseMarker(l)
		if !ok {
			continue
		}
		switch m.Event {
		case "RPCSTAT":
			rpcSeen, rpcRetrans = true, m.int("retrans")
		case "MSTAT":
			f := strings.Fields(m.Args["line"])
			if len(f) == 0 {
				continue
			}
			if f[0] == "xprt:" {
				xprtSeen = true
				mountXprt(&h, f[1:])
				continue
			}
			// "OP: ops trans timeouts bytes_sent bytes_recv queue rtt execute [errors]"
			if n := ints(f[1:]); len(n) >= 3 {
				opsSeen = true
				h.Ops += n[0]
				h.Retrans += max(n[1]-n[0], 0)
				h.Timeouts += n[2]
			}
		}
	}
	if !opsSeen && rpcSeen {
		h.Retrans = rpcRetrans
	}
	h.Reported = opsSeen || rpcSeen || xprtSeen
	return h
}

// kernelFaults counts the provider's queue-full messages in a console
// line the kernel printed (a printk timestamp first), whichever host.
func kernelFaults(h *Health, line string) {
	if !strings.HasPrefix(line, "[") {
		return
	}
	if sqFullRe.MatchString(line) {
		h.SQFull++
	}
	if cqFullRe.MatchString(line) {
		h.CQFull++
	}
}

// mountXprt reads a mountstats xprt line after "xprt:": the transport,
// then for tcp and rdma "port bind_count connect_count connect_time
// idle_time sends recvs bad_xids req_u bklog_u ...", and for rdma after
// those ten its own counters, of which the 10th is bad_reply_count
// (xprt_rdma_print_stats).
func mountXprt(h *Health, f []string) {
	if len(f) < 2 || (f[0] != "tcp" && f[0] != "rdma") {
		return
	}
	n := ints(f[1:])
	if len(n) < 8 {
		return
	}
	h.Reconnects = max(n[2]-1, 0)
	h.Sends = n[5]
	h.BadXIDs = n[7]
	if f[0] == "rdma" && len(n) >= 20 {
		h.ReadChunks, h.WriteChunks = n[10], n[11]
		h.BadReplies = n[19]
	}
}

// ints parses leading integer fields, stopping at the first that is not.
func ints(f []string) []int {
	var out []int
	for _, s := range f {
		v, err := strconv.Atoi(s)
		if err != nil {
			break
		}
		out = append(out, v)
	}
	return out
}
