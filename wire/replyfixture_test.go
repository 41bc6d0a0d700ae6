package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/reply"
)

var update = flag.Bool("update", false, "rewrite golden files (and the fixture reports/reply's tests are fed)")

// replyFixture is what reports/reply's tests are fed, as this package
// makes it: the replier's parts as the default configuration builds
// them, the real svcrdma v2 thread as the lore stage reads it, and the
// builder's failures as the build job stores them. Its JSON is the
// contract: reports/reply/fixture_test.go reads the same fields.
type replyFixture struct {
	Reports         reports.Config     `json:"reports"`
	Lab             labWords           `json:"lab"`
	Kernels         reply.Kernels      `json:"kernels"`
	Lists           []string           `json:"lists"`
	MaintainersOnly []string           `json:"maintainers_only"`
	TreeURLs        map[string]string  `json:"tree_urls"`
	Side            string             `json:"side"`
	Series          flow.Series        `json:"series"`
	Failures        map[string]failure `json:"failures"`
}

// labWords is what the default lab says of itself (reply.Lab), for the
// pairs and profiles the replies name.
type labWords struct {
	TestName, Test  string
	DefaultPair     string
	Pairs           map[string]string
	Links           map[string]string
	Pressure        map[string]string // by providers, comma-separated
	DebugIterations int
	// Limits are what the QEMU pair cannot exercise of a series changing
	// one file, by file (reply.Limits), for the files the replies use.
	Limits map[string][]string
}

// failure is a stage's error as a test row keeps it: its text and the
// detail the reply renders.
type failure struct {
	Error  string
	Detail json.RawMessage
}

var replyNow = time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)

// The fixture reports/reply's golden replies are fed is what wire
// makes of the default configuration and the real thread (go test
// -update rewrites it).
func TestReplyFixture(t *testing.T) {
	sh := testenv.Shared(t, "the real thread lives there")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Default()
	cfg.DataDir = dir
	s, err := NewLore(cfg, st, slog.New(slog.DiscardHandler)).ReadMbox(ctx, testenv.Mbox(t, filepath.Join(sh, "corpus", "threads", "svcrdma-v2")))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplier(cfg, nil, nil)
	// The toolchain is what kbuild.ProbeToolchain says on the Debian 12
	// builders (wire.go sets it from the builder).
	r.Kernels.Compiler = kbuild.Toolchain{Compiler: "gcc (Debian 12.2.0-14+deb12u1) 12.2.0", Binutils: "GNU ld (GNU Binutils for Debian) 2.40"}.Words()
	f := replyFixture{Reports: r.Cfg, Kernels: r.Kernels, Lists: r.Lists, MaintainersOnly: r.MaintainersOnly, TreeURLs: r.TreeURLs, Side: r.Sides.CandidateSide(s), Series: s,
		Failures: map[string]failure{}}
	name, test := cfg.Lab.TestWords()
	f.Lab = labWords{TestName: name, Test: test, DefaultPair: cfg.Lab.DefaultPair(), DebugIterations: cfg.Lab.DebugIterations(),
		Pairs: map[string]string{"qemu": cfg.Lab.PairWords("qemu")}, Links: map[string]string{}, Pressure: map[string]string{}}
	for _, p := range []string{flow.ProfileLossy, flow.ProfileDebug, flow.ProfilePressure + "-rxe", flow.ProfilePressure + "-siw",
		flow.ProfileFstests + "-rxe", flow.ProfileFstests + "-siw"} {
		f.Lab.Links[p] = cfg.Lab.LinkWords(p)
	}
	for _, provs := range [][]string{{"rxe"}, {"siw"}, {"rxe", "siw"}} {
		f.Lab.Pressure[strings.Join(provs, ",")] = cfg.Lab.PressureWords(provs)
	}
	f.Lab.Limits = map[string][]string{}
	files := []string{"drivers/infiniband/core/rw.c"}
	for _, c := range s.Changes {
		files = append(files, c.File)
	}
	for _, file := range files {
		f.Lab.Limits[file] = cfg.Lab.EmulationLimits("qemu", []flow.Change{{File: file}})
	}

	// The real series on a tree that lacks its files: the builder's own
	// error, as the build job stores it.
	f.Failures["apply_failed"] = failureOf(t, applyOnToyTree(t, s))
	// gcc 12's output for an error in svc_rdma_backchannel.c, which only
	// patch 8 touches.
	log, err := os.ReadFile("testdata/gcc-svc_rdma_backchannel.log")
	if err != nil {
		t.Fatal(err)
	}
	errs, warns := kbuild.ParseLog(bytes.NewReader(log))
	f.Failures["build_failed"] = failureOf(t, buildFailure(&kbuild.BuildError{Target: "bzImage", Diagnostics: errs, Warnings: warns, Tail: string(log)}))
	// A series that drops a config option the lab needs: the tree's
	// finding, never retried as the machine's fault.
	cerr := buildFailure(fmt.Errorf("build: %w", &kbuild.ConfigError{Lab: "qemu-softroce",
		Lost: []kbuild.ConfigLoss{{Option: "CONFIG_RDMA_RXE", Want: "m", Source: "qemu-softroce.config"}}}))
	if flow.IsInfra(cerr) {
		t.Fatalf("a lost config option is infra: %v", cerr)
	}
	f.Failures["build_failed_config"] = failureOf(t, cerr)

	out, err := json.MarshalIndent(f, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, filepath.Join("..", "reports", "reply", "testdata", "svcrdma-v2.json"), append(out, '\n'), *update)
}

// failureOf is a stage's error as the test row keeps it.
func failureOf(t *testing.T, err error) failure {
	t.Helper()
	var d flow.Detailed
	if !errors.As(err, &d) {
		t.Fatalf("%v carries no detail", err)
	}
	return failure{Error: err.Error(), Detail: d.Detail()}
}

// applyOnToyTree applies s with the build stage on a one-file tree.
func applyOnToyTree(t *testing.T, s flow.Series) error {
	work := t.TempDir()
	gitIn(t, work, "init", "-q", "-b", "master")
	os.WriteFile(filepath.Join(work, "README"), []byte("toy\n"), 0o644)
	gitIn(t, work, "add", "-A")
	// Fixed dates: the base's id is in the error, and so in the fixture.
	testenv.GitEnv(t, work, []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.org", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.org",
		"GIT_AUTHOR_DATE=2026-11-30T04:05:06Z", "GIT_COMMITTER_DATE=2026-11-30T04:05:06Z"}, "commit", "-q", "-m", "base")
	base := gitIn(t, work, "rev-parse", "HEAD")
	repo := filepath.Join(t.TempDir(), "trees.git")
	gitIn(t, work, "clone", "-q", "--bare", work, repo)
	bs, err := builder.OpenStore(repo)
	if err != nil {
		t.Fatal(err)
	}
	b := buildStage{&builder.Stage{Store: bs, RepoDir: repo, Cfg: builder.DefaultConfig(), Lab: "qemu", Now: func() time.Time { return replyNow }}}
	_, err = b.Apply(context.Background(), flow.Base{Tree: "nfsd", Commit: base}, s, &bytes.Buffer{})
	if err == nil || flow.IsInfra(err) {
		t.Fatalf("apply on a toy tree: %v", err)
	}
	return err
}
