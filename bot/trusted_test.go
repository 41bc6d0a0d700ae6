package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// A series that changes client code alone boots its kernel on the
// client beside the trusted base on the server, which takes the times;
// its base boots there too, to be timed the same way, and the base
// cache keeps those figures apart from the ones clients take.
func TestClientSideSeriesIsTimedByTheServer(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	s := series("<client@x>", "[PATCH] xprtrdma: harmless")
	s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: [PATCH] xprtrdma: harmless\n\n---\n" +
		"--- a/net/sunrpc/xprtrdma/verbs.c\n+++ b/net/sunrpc/xprtrdma/verbs.c\n")}
	h.ingest.Add(s)
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	if r, _ := h.report.Get("series:<client@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("verdict %q", r.Verdict)
	}
	runs := 0
	for _, c := range h.calls.List() {
		if !strings.HasPrefix(c, "run ") {
			continue
		}
		runs++
		if !strings.Contains(c, " on the client beside mainline-bbbb") {
			t.Errorf("boot %q is not on the client beside the trusted base", c)
		}
	}
	if runs == 0 {
		t.Fatal("nothing booted")
	}
	ctx := context.Background()
	tt, err := h.st.TestByKey(ctx, h.st.DB, "series:<client@x>:v1:")
	if err != nil {
		t.Fatal(err)
	}
	key := store.BaseKey{Tree: tt.Tree, Commit: tt.Base, Lab: tt.Lab, Params: "nfs-rdma-write-256M"}
	if plain, _, _ := h.st.BaseResults(ctx, h.st.DB, key, time.Hour); len(plain) != 0 {
		t.Errorf("%d server-timed base samples cached as client-timed ones", len(plain))
	}
	key.Params += " timed-by=server"
	if timed, _, _ := h.st.BaseResults(ctx, h.st.DB, key, time.Hour); len(timed) == 0 {
		t.Errorf("no server-timed base samples cached")
	}
}
