package wire

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/clients/aa"
	"github.com/rdmabot/rdmabot/clients/dashboard"
	"github.com/rdmabot/rdmabot/clients/ghbot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore/intake"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// Service is what serve runs: the bot with its stages, and the handler
// of the dashboard, its JSON API, the kernels' artifacts and the GitHub
// webhook.
type Service struct {
	Bot     *bot.Bot
	Handler http.Handler
}

// ServiceOptions are serve's flags and what the binary adds.
type ServiceOptions struct {
	Role, ID string
	// Version is the binary's, put in reproducers.
	Version string
	// Artifacts wraps the artifacts' handler (serve gives a kernel's
	// download more time to be written than a page); nil: as it is.
	Artifacts func(http.Handler) http.Handler
}

func (o ServiceOptions) artifacts(h http.Handler) http.Handler {
	if o.Artifacts == nil {
		return h
	}
	return o.Artifacts(h)
}

// NewService wires serve from cfg and st: the stages of o.Role, the bot,
// GitHub when bot.github is set, the dashboard with its reproducers and
// A/A results, the token over the kernels and the API. Start the bot and
// serve the handler.
func NewService(ctx context.Context, cfg Config, st *store.Store, o ServiceOptions, log *slog.Logger) (*Service, error) {
	// GitHub, when configured: the client posts the outbox's comments
	// (the answers to GitHub requests) and serves the webhook and polling.
	if err := upgradeSeries(ctx, st, log); err != nil {
		return nil, err
	}
	var ghc *github.Client
	if cfg.Bot.GitHub.Repo != "" {
		var err error
		if ghc, err = githubClient(cfg); err != nil {
			return nil, err
		}
	}
	stages, err := New(ctx, cfg, st, o.Role, ghc, log)
	if err != nil {
		return nil, err
	}
	if cfg.Bot.Runs == 0 {
		// The statistics' schedule: its first look needs this many runs.
		cfg.Bot.Runs = cfg.Reports.Runs
	}
	token, err := readToken(cfg.Bot.TokenFile)
	if err != nil {
		return nil, err
	}
	opts := bot.Options{Config: cfg.Bot, Token: token, CacheDir: cfg.CacheDir, Role: o.Role, Lab: cfg.Lab.Default, Params: Params(cfg.Lab),
		Branches: Branches(cfg), FetchTrees: FetchTrees(cfg), FetchInterval: cfg.Builder.FetchInterval.Duration,
		Stages: stages, Log: log, ID: o.ID, WarmBases: true, MailWatch: cfg.Lore.WatchInterval.Duration}
	var gh *ghbot.Bot
	if ghc != nil {
		if gh, err = newGitHub(cfg, ghc); err != nil {
			return nil, err
		}
		opts.GitHub = gh
	}
	b, err := bot.New(st, opts)
	if err != nil {
		return nil, err
	}
	if gh != nil {
		gh.Cmds, gh.Mem, gh.Log = b, st, log
	}
	mux := http.NewServeMux()
	dash := dashboard.New(st, b, log)
	if dash.Reproducer, err = NewReproducer(cfg, st, o.Version); err != nil {
		return nil, err
	}
	// /canary shows what `rdmabot lab aa` stored where it stores it.
	dash.AA = aa.Results{Dir: aa.Dir(cfg.CacheDir)}
	if dash.Replies, err = outbox.OpenLedger(ctx, st.DB); err != nil {
		return nil, err
	}
	dash.Lists = map[string]string{}
	for _, l := range cfg.Lore.Lists {
		dash.Lists[l.Name] = l.Address
	}
	dash.Register(mux)
	mux.Handle("GET /artifacts/", o.artifacts(http.StripPrefix("/artifacts/", b.Artifacts())))
	handler := http.Handler(mux)
	if token != "" {
		handler = requireToken(mux, token)
	}
	if gh != nil {
		mux.Handle("POST /github", gh)
	}
	return &Service{Bot: b, Handler: handler}, nil
}

// githubClient is the REST client of bot.github: its token, its API.
func githubClient(cfg Config) (*github.Client, error) {
	g := cfg.Bot.GitHub
	c := github.NewClient(nil)
	if g.TokenFile != "" {
		tok, err := os.ReadFile(g.TokenFile)
		if err != nil {
			return nil, err
		}
		c = c.WithAuthToken(strings.TrimSpace(string(tok)))
	}
	if g.API != "" {
		u, err := url.Parse(strings.TrimSuffix(g.API, "/") + "/")
		if err != nil {
			return nil, err
		}
		c.BaseURL, c.UploadURL = u, u
	}
	return c, nil
}

// newGitHub is the trigger side of bot.github: webhook, polling, commands.
func newGitHub(cfg Config, c *github.Client) (*ghbot.Bot, error) {
	g := cfg.Bot.GitHub
	owner, repo, _ := strings.Cut(g.Repo, "/")
	var secret []byte
	if g.SecretFile != "" {
		s, err := os.ReadFile(g.SecretFile)
		if err != nil {
			return nil, err
		}
		secret = []byte(strings.TrimSpace(string(s)))
	}
	tree := ""
	if len(cfg.Bot.Mainline.Trees) > 0 {
		tree = cfg.Bot.Mainline.Trees[0]
	}
	return &ghbot.Bot{Client: c, Owner: owner, Repo: repo, Secret: secret, Allow: g.Allow, Org: g.Org, Tree: tree, URL: cfg.Bot.URL}, nil
}

// readToken reads bot.token_file ("" when none is configured).
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("bot.token_file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("bot.token_file %s is empty", path)
	}
	return t, nil
}

// requireToken guards the kernels and the JSON API with the bot's token;
// the dashboard's pages and the webhook (signed by GitHub) stay as they are.
func requireToken(h http.Handler, token string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guarded := strings.HasPrefix(r.URL.Path, "/artifacts/") || strings.HasPrefix(r.URL.Path, "/api/")
		if guarded && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rdmabot"`)
			http.Error(w, "a token is required (bot.token_file)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// seriesReread is the checkpoint upgradeSeries sets once it ran: later
// starts do not read every stored series again. It was
// "upgrade/series-parsed" before series carried their base-commit hint
// and subject tags: a new name reads the rows once more for those.
const seriesReread = "upgrade/series-hints"

// upgradeSeries rereads the series rows an older bot stored with their
// mails raw or without what intake now reads of them (intake.Reread),
// once, so that every stage after intake finds them read.
// A row whose mail no longer parses is left as it is and named in the
// log: its test then fails on its own, not every other one.
func upgradeSeries(ctx context.Context, st *store.Store, log *slog.Logger) error {
	if done, err := st.Checkpoint(ctx, st.DB, seriesReread); err != nil || done != "" {
		return err
	}
	n, err := st.RewriteSeries(ctx, func(data []byte) ([]byte, bool, error) {
		var s flow.Series
		if err := json.Unmarshal(data, &s); err != nil {
			log.Warn("a stored series does not decode; left as it is", "msgid", s.MsgID, "err", err)
			return nil, false, nil
		}
		changed, err := intake.Reread(&s)
		if err != nil {
			log.Warn("a stored series' mail does not parse; left as it is", "msgid", s.MsgID, "err", err)
			return nil, false, nil
		}
		if !changed {
			return nil, false, nil
		}
		out, err := json.Marshal(s)
		return out, err == nil, err
	})
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("series rows an older bot stored were reread from their raw mails", "rows", n)
	}
	return st.SetCheckpoint(ctx, st.DB, seriesReread, "done")
}

// NewClient is the bot the CLI queues work with for a running serve:
// it inserts jobs and works none. withLore gives it lore's fetch and
// mbox readers, for a series named by Message-ID or given as a file.
func NewClient(cfg Config, st *store.Store, withLore bool, log *slog.Logger) (*bot.Bot, error) {
	var stages bot.Stages
	if withLore {
		lo := NewLore(cfg, st, log)
		stages = bot.Stages{Fetch: lo, Mbox: lo}
	}
	return bot.New(st, bot.Options{Config: cfg.Bot, CacheDir: cfg.CacheDir, Lab: cfg.Lab.Default, Params: Params(cfg.Lab),
		Branches: Branches(cfg), Stages: stages, Log: log})
}
