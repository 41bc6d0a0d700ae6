// Package wire is the one place that joins the pipeline: it reads
// config.toml (one section per stage, each owned by its package) and
// puts the real stages (lore, builder, kbuild, lab, reports) behind the
// bot's interfaces. It alone imports every stage; each adapter converts
// types and sorts the stage's typed errors into the bot's two kinds:
// infrastructure (retried) or the patch's fault (a verdict).
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cgroup"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
	"github.com/rdmabot/rdmabot/lore/intake"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// NewLore reads the lists configured in cfg into st.
func NewLore(cfg Config, st *store.Store, log *slog.Logger) *intake.Reader {
	window := 30 * 24 * time.Hour
	if g := 4 * cfg.Lore.GracePeriod.Duration; g > window {
		window = g
	}
	l := &intake.Reader{St: mailStore{st}, Cfg: cfg.Lore, DataDir: cfg.DataDir, Log: log, Now: time.Now, Window: window, HTTP: &feed.HTTPClient{}}
	if cfg.Lore.CommandDKIM {
		l.Auth = &lore.DKIM{Resolver: lore.NewDKIMResolver(cfg.Lore.DKIMResolver)}
	}
	return l
}

// mailStore is the bot's database as the intake keeps the lists' mail,
// its checkpoints and its state there.
type mailStore struct{ st *store.Store }

func (m mailStore) Load(ctx context.Context, source string) (string, error) {
	return m.st.Checkpoint(ctx, m.st.DB, source)
}

// Save writes at once: the mail before the checkpoint is stored already.
func (m mailStore) Save(ctx context.Context, source, v string) error {
	return m.st.SetCheckpoint(ctx, m.st.DB, source, v)
}

func (m mailStore) AddMail(ctx context.Context, x intake.Mail) error {
	return m.st.AddMail(ctx, store.Mail(x))
}

func (m mailStore) MailSince(ctx context.Context, t time.Time) ([]intake.Mail, error) {
	mail, err := m.st.MailSince(ctx, t)
	out := make([]intake.Mail, len(mail))
	for i, x := range mail {
		out[i] = intake.Mail(x)
	}
	return out, err
}

func (m mailStore) State(ctx context.Context, key string) (string, error) {
	return m.st.State(ctx, key)
}

func (m mailStore) SetState(ctx context.Context, key, v string) error {
	return m.st.SetState(ctx, key, v)
}

func (m mailStore) ListHealth(ctx context.Context, list string) (intake.Health, error) {
	h, _, err := m.st.HealthOf(ctx, m.st.DB, "list", list)
	return intake.Health{OK: h.OK, Failures: h.Failures, At: h.At}, err
}

func (m mailStore) RecordRead(ctx context.Context, list string, took time.Duration, err error) (intake.Health, error) {
	h, serr := m.st.RecordHealth(ctx, m.st.DB, "list", list, took, err)
	return intake.Health{OK: h.OK, Failures: h.Failures, At: h.At}, serr
}

// Branches are the configured trees' branches by tree name.
func Branches(cfg Config) map[string][]string {
	out := map[string][]string{}
	for _, t := range cfg.Builder.Trees {
		out[t.Name] = append([]string(nil), t.Branches...)
	}
	return out
}

// FetchTrees are the configured trees that have a URL, in config order.
func FetchTrees(cfg Config) []string {
	var out []string
	for _, t := range cfg.Builder.Trees {
		if t.URL != "" {
			out = append(out, t.Name)
		}
	}
	return out
}

// LabProfile is one of the lab's profiles besides the default test and
// the debug profile: On when config turns it on, else Off says which key
// turns it off.
type LabProfile struct {
	Name string
	On   bot.Profile
	Off  string
}

// Profiles are the lab's profiles in the order a test boots them: the
// one list serve's lab job and `rdmabot lab aa` choose from. The
// client-side boots run the default test: cheaper than the pressure
// boots, so a crash they find comes first.
func Profiles(l *lab.Runner) ([]LabProfile, error) {
	var out []LabProfile
	// on: the constructor's pointer is not nil (a nil *lab.Lossy in a
	// bot.Profile is not a nil interface).
	add := func(name, off string, p bot.Profile, on bool, err error) error {
		if err != nil {
			return err
		}
		lp := LabProfile{Name: name, Off: off}
		if on {
			lp.On, lp.Off = p, ""
		}
		out = append(out, lp)
		return nil
	}
	lossy, err := lab.NewLossy(l)
	if err := add(flow.ProfileLossy, "lab.lossy.netem is empty", lossy, lossy != nil, err); err != nil {
		return nil, err
	}
	clientSide, err := lab.NewClientSide(l)
	if err := add(flow.ProfileClientSide, "lab.client_side.boots is 0", clientSide, clientSide != nil, err); err != nil {
		return nil, err
	}
	pressure, err := lab.NewPressure(l)
	if err := add(flow.ProfilePressure, "lab.pressure.providers is empty", pressure, pressure != nil, err); err != nil {
		return nil, err
	}
	// fstests last: its group is the longest boot of all.
	fstests, err := lab.NewFstests(l)
	if err := add(flow.ProfileFstests, "lab.fstests.providers is empty", fstests, fstests != nil, err); err != nil {
		return nil, err
	}
	return out, nil
}

// New wires the real stages a role needs (all, ingest, build, lab, or
// several joined by commas). The lab pair and its guest image are made on
// first use; a lab-only machine needs no compiler and no trees. gh is the
// client of bot.github (nil when it is off): the outbox posts the
// comments that answer GitHub requests with it.
func New(ctx context.Context, cfg Config, st *store.Store, role string, gh *github.Client, log *slog.Logger) (bot.Stages, error) {
	lo := NewLore(cfg, st, log)
	l := NewRunner(cfg, st, log)
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, cfg.DataDir, gh, time.Now, log)
	if err != nil {
		return bot.Stages{}, fmt.Errorf("outbox: %w", err)
	}
	r := NewReplier(cfg, ob, log)
	stages := bot.Stages{Ingest: lo, Fetch: lo, Mbox: lo, Lab: l, Decide: r, Report: r}
	profiles, err := Profiles(l)
	if err != nil {
		return bot.Stages{}, err
	}
	for _, p := range profiles {
		if p.On != nil {
			stages.Profiles = append(stages.Profiles, p.On)
		}
	}
	// The kernel is configured for the pair that boots it: the QEMU
	// guests' tinyconfig, or a real pair's defconfig with its adapters.
	kernelLab, err := cfg.Lab.KernelLab(cfg.Lab.Default)
	if err != nil {
		return bot.Stages{}, fmt.Errorf("lab.default: %w", err)
	}
	debug, err := lab.NewDebug(l)
	if err != nil {
		return bot.Stages{}, err
	}
	if debug != nil {
		// The debug profile's kernels are the lab's with debug.config.
		if _, err := kbuild.LookupLab(kbuild.DebugLab(kernelLab)); err != nil {
			log.Warn("lab.debug is on, but the lab's kernel has no debug configuration: the debug profile is off", "lab", kernelLab)
		} else {
			stages.Debug = debug
		}
	}
	hasRole := func(want ...string) bool {
		return slices.ContainsFunc(strings.Split(role, ","), func(r string) bool { return slices.Contains(want, strings.TrimSpace(r)) })
	}
	// Builds and QEMU guests run posted code: each in a cgroup of its own.
	if hasRole(bot.RoleAll, bot.RoleBuild, bot.RoleLab) {
		if err := checkLimits(ctx, st, cgroup.Check, log); err != nil {
			return bot.Stages{}, err
		}
	}
	if hasRole(bot.RoleAll, bot.RoleLab) {
		// What QEMU reads: the kernels it boots (from the artifact store)
		// and its images.
		gids, _ := os.Getgroups()
		if err := checkSandboxReads(os.Geteuid(), append(gids, os.Getegid()), bot.ArtifactRoot(cfg.Bot, cfg.CacheDir), cfg.LabDirs().Cache); err != nil {
			return bot.Stages{}, err
		}
	}
	if !hasRole(bot.RoleAll, bot.RoleBuild) {
		return stages, nil
	}
	bs, err := builder.OpenStore(builder.StorePath(cfg.DataDir))
	if err != nil {
		return bot.Stages{}, fmt.Errorf("builder store: %w", err)
	}
	lock := cfg.Builder.HeavyLock
	if lock != "" {
		// The lock file is made by whoever sets up the machine; a missing
		// directory must not stop builds.
		if _, err := os.Stat(filepath.Dir(lock)); err != nil {
			lock = ""
		}
	}
	kb, err := kbuild.New(ctx, kbuild.Options{
		Dir:       filepath.Join(cfg.CacheDir, "kbuild"),
		CCacheDir: filepath.Join(cfg.CacheDir, "ccache"),
		Jobs:      cfg.Builder.Jobs,
		Timeout:   cfg.Builder.BuildTimeout.Duration,
		HeavyLock: lock,
		Log:       log,
	})
	if err != nil {
		return bot.Stages{}, fmt.Errorf("kbuild: %w", err)
	}
	r.Kernels.Compiler = kb.Toolchain().Words()
	b := &builder.Stage{Store: bs, RepoDir: builder.StorePath(cfg.DataDir), Cfg: cfg.Builder, Kbuild: kb, Lab: kernelLab, Now: time.Now}
	stages.Build, stages.Check, stages.Trees = buildStage{b}, buildStage{b}, b
	if stages.Debug != nil {
		db := *b
		db.Lab = kbuild.DebugLab(kernelLab)
		stages.DebugBuild = buildStage{&db}
	}
	r.Maintainers, r.ListsOf = b, b
	lo.Maintainers = b
	return stages, nil
}

// Params names the test the lab runs, for the base-result cache: a
// change of test, of the QEMU pair's clock mode or of the guest image and
// its scripts gives new base measurements (guest timings from two -icount
// settings, or from two versions of the timed loop, do not compare).
func Params(c lab.Config) string {
	t := c.Test
	p := fmt.Sprintf("%s-%dMiB-x%d-nfs%s-%s-%s", t.Kind, t.SizeMiB, t.Iterations, t.NFSVersion, t.Transport, t.RDMA)
	if t.Netem != "" {
		p += "-netem(" + t.Netem + ")"
	}
	if c.QEMU.Icount != "" {
		p += "-icount(" + c.QEMU.Icount + ")"
	}
	return p + "-guest(" + lab.DefaultRecipe().Hash()[:8] + ")"
}

// NewRunner is the lab as cfg configures it, decoding crashes against
// the builder's paths;
// consoles keeps each boot's consoles (nil: none are kept).
func NewRunner(cfg Config, consoles lab.ConsoleKeeper, log *slog.Logger) *lab.Runner {
	return &lab.Runner{Cfg: cfg.Lab, Dirs: cfg.LabDirs(), Test: cfg.Lab.Test, Log: log, Consoles: consoles,
		BuildDirs: kbuild.BuildDirs()}
}

// seriesSide is the side a series' kernel boots on (lab.SideOf).
func seriesSide(s flow.Series) string { return lab.SideOf(s.Changes) }

// checkLimits says loudly when builds and guests here go without their
// cgroup limits (a serve user given no cgroup of its own): an ERROR in the log,
// and a failing "sandbox build-limits" source on the dashboard and in
// rdmabot status, until a start where they apply. It fails only when
// the record cannot be stored.
func checkLimits(ctx context.Context, st *store.Store, check func() error, log *slog.Logger) error {
	start := time.Now()
	err := check()
	if err != nil {
		log.Error("builds and QEMU guests of posted series are not contained", "err", err)
	}
	_, rerr := st.RecordHealth(ctx, st.DB, "sandbox", "build-limits", time.Since(start), err)
	return rerr
}
