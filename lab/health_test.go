package lab

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files (and, in the QEMU tests, the saved consoles)")

// healthOf on the health markers of real runs (saved by
// TestPairTransferRxe and TestPairReconnectCounted under -update): a
// clean NFSv3/RDMA transfer, and one whose nfsd restarted mid-transfer.
func TestHealthOfRealConsoles(t *testing.T) {
	for _, name := range []string{"rxe-clean", "rxe-reconnect"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "health-"+name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			client, server, _ := strings.Cut(string(raw), "--\n")
			got, _ := json.MarshalIndent(healthOf(client, server, true), "", "  ")
			testenv.Golden(t, filepath.Join("testdata", "health-"+name+".json"), append(got, '\n'), *update)
		})
	}
}

// The counts as the kernel prints them: per-op retransmissions are
// transmissions beyond the operations, reconnects are connects after the
// first, RPC/RDMA bad replies are the rdma xprt's 20th figure (not the
// 19th, marshal failures); with no mountstats the client's RPC total
// stands in; a console without markers reports nothing.
func TestHealthOf(t *testing.T) {
	client := `[   12.3] some kernel line
@@RB MSTAT line=xprt: rdma 0 0 3 0 12 400 398 2 400 0 0 0 0 0 0 0 0 0 4 1 0 0 0 0 0 0 0
@@RB MSTAT line=READ: 100 103 1 12800 104857600 20 900 1000 0
@@RB MSTAT line=WRITE: 100 100 0 104857600 12800 10 800 950 0
@@RB MSTAT line=NULL: 1 1 0 44 24 0 0 0 0
@@RB RPCSTAT calls=210 retrans=9
`
	server := "@@RB SRVSTAT calls=210 badcalls=2\n"
	h := healthOf(client, server, true)
	want := Health{Reported: true, Retrans: 3, Timeouts: 1, Reconnects: 2, BadXIDs: 2, BadReplies: 1, ServerBadCalls: 2, Ops: 201, Sends: 400}
	if h != want {
		t.Errorf("got %+v\nwant %+v", h, want)
	}
	if h := healthOf("@@RB RPCSTAT calls=210 retrans=9\n", "", true); !h.Reported || h.Retrans != 9 {
		t.Errorf("RPC totals only: %+v", h)
	}
	if h := healthOf("[ 1.0] Linux version\n", "", true); h.Reported || h.Counters() != nil {
		t.Errorf("no markers: %+v", h)
	}
	// A candidate client's zeros mean nothing: the trusted server's
	// view stands, and decides whether anything was reported; its
	// nonzero counts still count against it.
	zeros := "@@RB MSTAT line=xprt: rdma 0 0 1 0 12 400 398 0 400 0\n@@RB RPCSTAT calls=210 retrans=0\n"
	faulty := "@@RB SRVSTAT calls=210 badcalls=0\n@@RB SRVCONN rc_hits=4 reconnects=2\n"
	if h := healthOf(zeros, faulty, false); !h.Reported || h.Retrans != 4 || h.Reconnects != 2 {
		t.Errorf("a candidate client's zeros, the server's faults: %+v", h)
	}
	if h := healthOf(zeros, faulty, true); h.Retrans != 0 || h.Reconnects != 0 {
		t.Errorf("a trusted client's counts: %+v", h)
	}
	if h := healthOf("@@RB RPCSTAT calls=210 retrans=9\n", "@@RB SRVSTAT calls=210 badcalls=0\n@@RB SRVCONN rc_hits=0 reconnects=0\n", false); !h.Reported || h.Retrans != 9 {
		t.Errorf("a candidate client's own retransmissions: %+v", h)
	}
	if h := healthOf(zeros, "", false); h.Reported {
		t.Errorf("a candidate client's report alone: %+v", h)
	}
}

// The provider's queue-full messages count on either host, kernel lines
// only (a marker or a userspace line quoting them does not), and the
// chunk counts and svcrdma's Send Queue waits are read but are no fault.
func TestHealthOfSendQueueEvidence(t *testing.T) {
	client := `[   40.1] rdma_rxe: rxe0: qp#17 post_one_send: send queue full
@@RB MSTAT line=xprt: rdma 0 0 1 0 12 400 398 0 400 0 7 96 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
@@RB MSTAT line=READ: 100 100 0 12800 104857600 20 900 1000 0
echo post_one_send: send queue full
`
	server := `[   41.0] rdma_rxe: rxe0: qp#18 post_one_send: send queue full
[   41.0] rdma_rxe: rxe0: qp#18 post_one_send: send queue full
[   41.2] rdma_rxe: rxe0: cq#3 rxe_cq_post: queue full
@@RB SRVSTAT calls=210 badcalls=0
@@RB SVCRDMA sq_starve=1234 reads=7 writes=96 recvs=210
`
	h := healthOf(client, server, true)
	want := Health{Reported: true, SQFull: 3, CQFull: 1, Ops: 100, Sends: 400, ReadChunks: 7, WriteChunks: 96, SQStarve: 1234}
	if h != want {
		t.Errorf("got %+v\nwant %+v", h, want)
	}
	if h.Faults() != 4 {
		t.Errorf("faults %d, want the 4 queue-full messages", h.Faults())
	}
	c := h.Counters()
	if c["sq_full"] != 3 || c["cq_full"] != 1 || c["write_chunks"] != 96 || c["sq_starve"] != 1234 {
		t.Errorf("counters %v", c)
	}
}
