package reproduce

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// The bundle carries the settings and tree URL it was given and reruns
// the candidate on the side the lab booted it on (the server when
// nobody says); a branch test and a test with no base have none.
func TestMakerUsesWhatItIsGiven(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: []*flow.Message{fakestage.Mail("From: a@x\nSubject: [PATCH] xprtrdma: x\nMessage-ID: <p@x>\n\nbody\n")}})
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "p@x", Version: 1, Tree: "rdma", Subject: "[PATCH] xprtrdma: x", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	add := func(tst store.Test) int64 {
		id, _, err := st.AddTest(ctx, st.DB, tst)
		if err != nil {
			t.Fatal(err)
		}
		tst.ID = id
		if err := st.UpdateTest(ctx, st.DB, tst); err != nil {
			t.Fatal(err)
		}
		return id
	}
	series := add(store.Test{Key: "s", Kind: "series", SeriesID: sid, Tree: "rdma", Base: strings.Repeat("1a", 20), State: "done"})
	waiting := add(store.Test{Key: "w", Kind: "series", SeriesID: sid, Tree: "rdma", State: "queued"})
	branch := add(store.Test{Key: "m", Kind: "mainline", Tree: "mainline", Base: strings.Repeat("1a", 20), State: "done"})

	m := &Maker{St: st, Artifacts: artifact.Dir{Root: t.TempDir()}, Repo: t.TempDir(), Settings: []byte("[lab]\n"),
		TreeURLs: map[string]string{"rdma": "https://user:s3cret@git.example.org/rdma.git"}}
	file := func(side func(flow.Series) string) map[string]string {
		t.Helper()
		m.Side = side
		b, err := m.Bundle(ctx, series)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range b.Files {
			out[f.Name] = string(f.Data)
		}
		return out
	}
	files := file(nil)
	if files["lab.toml"] != "[lab]\n" || strings.Contains(files["run.sh"], "--side client") {
		t.Errorf("no side given: lab.toml %q, run.sh:\n%s", files["lab.toml"], files["run.sh"])
	}
	if !strings.Contains(files["run.sh"], "git.example.org/rdma.git") || strings.Contains(files["run.sh"], "s3cret") {
		t.Errorf("the tree URL, without its password:\n%s", files["run.sh"])
	}
	if files := file(func(flow.Series) string { return "client" }); !strings.Contains(files["run.sh"], "--side client") {
		t.Errorf("a client-side series reruns on the server:\n%s", files["run.sh"])
	}
	for _, id := range []int64{waiting, branch} {
		if _, err := m.Bundle(ctx, id); !errors.Is(err, ErrNone) {
			t.Errorf("test %d: %v, want ErrNone", id, err)
		}
	}
}
