package bot

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

// Config is the [bot] section of config.toml.
type Config struct {
	// DBURL is empty for the embedded SQLite database in the data
	// directory, or a postgres:// URL when several machines share work.
	DBURL string `toml:"db_url"`
	// Listen is the dashboard and webhook address.
	Listen string `toml:"listen"`
	// TokenFile holds the token that /artifacts and /api/ ask for (as
	// "Authorization: Bearer <token>") and that workers send when they
	// pull kernels. Required when Listen is not on loopback: a built
	// kernel, its config and the test data are not for everyone.
	TokenFile string `toml:"token_file"`
	// URL is how others reach this process: links in replies, and other
	// workers pulling the artifacts it built.
	URL string `toml:"url"`
	// Artifacts is where built kernels are kept; empty means
	// <cache_dir>/artifacts. Workers on other machines pull from URL.
	Artifacts string `toml:"artifacts"`
	// ArtifactsMaxMiB bounds the artifact directory (and kbuild's store,
	// which shares its files), in MiB, checked after each kernel is
	// added: the least recently used kernels go first, never one a test
	// not finished needs; 0 means no bound.
	ArtifactsMaxMiB int64 `toml:"artifacts_max_mib"`
	// Runs is how many base and candidate runs the first lab round
	// makes; 0 follows the statistics' schedule (reports.runs), which
	// also says how many more each further round adds.
	Runs int `toml:"runs"`
	// MaxRounds bounds how often the statistics may ask for more runs.
	MaxRounds int `toml:"max_rounds"`
	// ConfirmRuns is how many times a bisection measures the culprit and
	// its parent again before blaming (each time a full comparison of
	// Runs boots against the good commit), besides the revert.
	ConfirmRuns int `toml:"confirm_runs"`
	// SeriesBisect: when a series of several patches ends in REGRESSION,
	// CRASH or BUILD_FAILED, its reply waits while the bot tests the
	// series' prefixes and names the first bad patch, answering it.
	SeriesBisect bool `toml:"series_bisect"`
	// AuthorDailyTests bounds the series tests one sender's postings,
	// and their own mail commands on their series, start in 24 hours (0:
	// no bound). Past it a posting is kept and shown, not tested, and a
	// command is answered that it was not: a flood is not a day of lab
	// time. Others' commands, GitHub requests and the CLI are not counted.
	AuthorDailyTests int `toml:"author_daily_tests"`
	// ListDailyTests bounds the series tests the postings to one list
	// start in 24 hours (0: no bound), whoever sends them: a flood of
	// forged senders is not a day of lab time either.
	ListDailyTests int `toml:"list_daily_tests"`
	// BaseMaxAge is how long measured base results are reused.
	BaseMaxAge cfgtype.Duration `toml:"base_max_age"`
	// BaseYieldMax is how long a test's base kernel that nothing has
	// built yet gives way to other tests' lab rounds (it always gives
	// way to builds); past it the rounds wait for the build instead.
	BaseYieldMax cfgtype.Duration `toml:"base_yield_max"`
	// LeaseTTL is how long a lab pair stays leased to a job whose
	// process stopped renewing it (it died).
	LeaseTTL cfgtype.Duration `toml:"lease_ttl"`
	// MaxAttempts bounds retries of a job failing on infrastructure.
	MaxAttempts int `toml:"max_attempts"`
	// RescueAfter is when a job still marked running is taken to belong
	// to a dead process and retried. Longer than any build or lab round.
	RescueAfter cfgtype.Duration `toml:"rescue_after"`
	// IngestInterval is how often the lists are polled: lore.poll_interval,
	// set by the wiring (one key for one setting).
	IngestInterval cfgtype.Duration `toml:"-"`

	Mainline MainlineConfig `toml:"mainline"`
	Canary   CanaryConfig   `toml:"canary"`
	GitHub   GitHubConfig   `toml:"github"`
}

// CanaryConfig schedules the A/A canary: the default base (the base a
// series naming none gets) compared with itself on the default pair, as
// a series is, round for round. Any REGRESSION or IMPROVEMENT it finds is
// a false alarm; a metric with too many of them is muted.
type CanaryConfig struct {
	// Schedule is a cron spec; "" turns the canary off.
	Schedule string `toml:"schedule"`
	// Window is how far back the false-alarm rate is measured.
	Window cfgtype.Duration `toml:"window"`
	// MaxFalseAlarmRate is the rate over Window above which a metric is
	// not decided on (muted) until its rate falls back to it.
	MaxFalseAlarmRate float64 `toml:"max_false_alarm_rate"`
}

// MainlineConfig schedules runs of the configured trees' branch heads.
type MainlineConfig struct {
	// Schedules are cron specs (5 fields, CRON_TZ= allowed, @daily).
	Schedules []string `toml:"schedules"`
	// Trees are builder tree names whose branches are tested.
	Trees []string `toml:"trees"`
	// Metric is the figure whose regression starts a bisection.
	Metric string `toml:"metric"`
}

// GitHubConfig turns issue comments into commands. Off when Repo is "".
type GitHubConfig struct {
	// Repo is owner/name of the repository whose issues are watched.
	Repo string `toml:"repo"`
	// API is the REST base URL; empty means api.github.com.
	API string `toml:"api"`
	// TokenFile holds the token used to comment and label.
	TokenFile string `toml:"token_file"`
	// SecretFile holds the webhook secret; empty disables the webhook.
	SecretFile string `toml:"secret_file"`
	// PollInterval polls comments with ETags; 0 disables polling.
	PollInterval cfgtype.Duration `toml:"poll_interval"`
	// Allow are logins always allowed to command the bot.
	Allow []string `toml:"allow"`
	// Org is the organization whose members may command the bot.
	Org string `toml:"org"`
}

// DefaultConfig is one machine, SQLite, dashboard on loopback.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:8480",
		URL:              "http://127.0.0.1:8480",
		Runs:             0,
		MaxRounds:        6,
		ConfirmRuns:      1,
		SeriesBisect:     true,
		AuthorDailyTests: 20,
		ListDailyTests:   100,
		ArtifactsMaxMiB:  20 << 10,
		BaseMaxAge:       cfgtype.D(7 * 24 * time.Hour),
		BaseYieldMax:     cfgtype.D(time.Hour),
		LeaseTTL:         cfgtype.D(2 * time.Minute),
		MaxAttempts:      8,
		RescueAfter:      cfgtype.D(4 * time.Hour),
		IngestInterval:   cfgtype.D(2 * time.Minute),
		Mainline: MainlineConfig{
			Schedules: []string{"CRON_TZ=UTC 0 */6 * * *"},
			Trees:     []string{"mainline"},
			Metric:    "copy_MBps",
		},
		Canary: CanaryConfig{
			Schedule:          "CRON_TZ=UTC 30 3 * * *",
			Window:            cfgtype.D(30 * 24 * time.Hour),
			MaxFalseAlarmRate: 0.05,
		},
		GitHub: GitHubConfig{
			PollInterval: cfgtype.D(time.Minute),
			Allow:        []string{},
		},
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return fmt.Errorf("bot.listen is empty")
	}
	if c.TokenFile == "" && !loopback(c.Listen) {
		return fmt.Errorf("bot.listen %q is not on loopback: set bot.token_file, the token /artifacts and /api/ ask for", c.Listen)
	}
	if c.DBURL != "" && !isPostgresURL(c.DBURL) {
		return fmt.Errorf("bot.db_url must be empty (SQLite) or postgres://..., got %q", c.DBURL)
	}
	// Links are bot.url + "/tests/N": anything but an absolute http(s)
	// URL makes every one of them dead.
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bot.url %q is not an http:// or https:// URL with a host (how others reach this process, e.g. https://rdmabot.example.org)", c.URL)
	}
	if c.ListDailyTests < 0 {
		return fmt.Errorf("bot.list_daily_tests must not be negative (0: no bound)")
	}
	if c.ArtifactsMaxMiB < 0 {
		return fmt.Errorf("bot.artifacts_max_mib must not be negative (0: no bound)")
	}
	if c.AuthorDailyTests < 0 {
		return fmt.Errorf("bot.author_daily_tests must not be negative (0: no bound)")
	}
	if c.Runs < 0 || c.MaxRounds < 1 || c.MaxAttempts < 1 || c.ConfirmRuns < 1 {
		return fmt.Errorf("bot.runs must not be negative, bot.max_rounds, bot.max_attempts and bot.confirm_runs must be at least 1")
	}
	if c.BaseYieldMax.Duration < 0 {
		return fmt.Errorf("bot.base_yield_max must not be negative (0: a base gives way to builds only)")
	}
	if c.LeaseTTL.Duration < time.Second || c.RescueAfter.Duration < time.Second || c.IngestInterval.Duration <= 0 {
		return fmt.Errorf("bot.lease_ttl, bot.rescue_after and lore.poll_interval must be positive")
	}
	for _, s := range c.Mainline.Schedules {
		if _, err := cron.ParseStandard(s); err != nil {
			return fmt.Errorf("bot.mainline.schedules: %q: %w", s, err)
		}
	}
	if c.Canary.Schedule != "" {
		if _, err := cron.ParseStandard(c.Canary.Schedule); err != nil {
			return fmt.Errorf("bot.canary.schedule: %q: %w", c.Canary.Schedule, err)
		}
	}
	if c.Canary.Window.Duration <= 0 || c.Canary.MaxFalseAlarmRate < 0 || c.Canary.MaxFalseAlarmRate >= 1 {
		return fmt.Errorf("bot.canary.window must be positive and bot.canary.max_false_alarm_rate in [0, 1)")
	}
	if len(c.Mainline.Schedules) > 0 && c.Mainline.Metric == "" {
		return fmt.Errorf("bot.mainline.metric is empty")
	}
	if c.GitHub.Repo != "" {
		if o, n, ok := strings.Cut(c.GitHub.Repo, "/"); !ok || o == "" || n == "" {
			return fmt.Errorf("bot.github.repo must be owner/name, got %q", c.GitHub.Repo)
		}
		if c.GitHub.PollInterval.Duration < 0 {
			return fmt.Errorf("bot.github.poll_interval must not be negative")
		}
	}
	return nil
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// loopback says whether a listen address only takes connections from
// this machine.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
