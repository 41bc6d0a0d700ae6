// Package reports compares patched against base runs with sound
// statistics, decides the verdict and writes and delivers the reply:
// an in-thread email, a GitHub comment, the outbox, the run page.
package reports

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// Config is the [reports] section of config.toml.
type Config struct {
	// MinEffect is the smallest relative change reported (0.05 = 5 %).
	MinEffect float64 `toml:"min_effect"`
	// Alpha is the false alarm rate of one whole comparison, split over
	// metrics and looks.
	Alpha float64 `toml:"alpha"`
	// Runs per kernel before the first look, RunsStep more per further
	// look, MaxRuns the budget.
	Runs     int `toml:"runs"`
	RunsStep int `toml:"runs_step"`
	MaxRuns  int `toml:"max_runs"`
	// Resamples per bootstrap interval.
	Resamples int `toml:"resamples"`

	// From is the bot's mailbox; its domain makes Message-IDs.
	From string `toml:"from"`
	// ArchiveList is Cc'd on every reply so each has a lore URL for
	// Closes:; ArchiveURL is that list on lore ("" = lore's /r/).
	ArchiveList string `toml:"archive_list"`
	ArchiveURL  string `toml:"archive_url"`
	// DocsURL is linked from every signature.
	DocsURL string `toml:"docs_url"`
	// Contact is the person who answers for the bot (an address), named
	// in every signature; "" names none.
	Contact string `toml:"contact"`
	// TestedBy offers a Tested-by tag on a pass.
	TestedBy bool `toml:"tested_by"`
	// CCMaintainers adds to a reply's Cc the maintainers and reviewers
	// MAINTAINERS lists for the files the series touches (at its base).
	CCMaintainers bool `toml:"cc_maintainers"`
	// MailOutcomes are the verdicts mailed to a series' thread (Audience):
	// what a maintainer must act on. Others reach the dashboard, and
	// whoever asked by mail.
	MailOutcomes []string `toml:"mail_outcomes"`
	// FstestsFlaky are fstests tests measured flaky on healthy kernels
	// (A/A comparisons of the group), each with its measured rate: their
	// failures are shown beside it and never decide.
	FstestsFlaky map[string]string `toml:"fstests_flaky"`

	// Mail enables sending mail; off, mail stays in the outbox. GitHub
	// comments do not wait for it (bot.github is their switch).
	Mail bool `toml:"mail"`
	// Moderate holds every reply until `rdmabot outbox approve`.
	Moderate bool `toml:"moderate"`
	// DailyLimit caps replies sent per 24 hours.
	DailyLimit int `toml:"daily_limit"`
	// AuthorDailyLimit caps replies sent to one author per 24 hours.
	AuthorDailyLimit int `toml:"author_daily_limit"`
	// ListDailyLimit caps replies sent to one mailing list per 24 hours.
	ListDailyLimit int `toml:"list_daily_limit"`
	// OptOut lists addresses, @domains or GitHub logins ("github:login")
	// never replied to.
	OptOut []string `toml:"opt_out"`
	// Outbox is the Maildir of replies; "" is <data_dir>/outbox.
	Outbox string `toml:"outbox"`

	SMTP      SMTPConfig      `toml:"smtp"`
	Patchwork PatchworkConfig `toml:"patchwork"`
}

// PatchworkConfig is the patchwork instance that tracks the lists: each
// patch of a tested series gets a check there.
type PatchworkConfig struct {
	// URL of the instance, e.g. https://patchwork.kernel.org ("" = off).
	URL string `toml:"url"`
	// TokenFile holds the API token (never in config.toml).
	TokenFile string `toml:"token_file"`
	// Context names our checks on every patch.
	Context string `toml:"context"`
}

// SMTPConfig is the mail submission server.
type SMTPConfig struct {
	// Addr is host:port of the submission server.
	Addr string `toml:"addr"`
	// StartTLS is required unless the server is on loopback.
	StartTLS bool   `toml:"starttls"`
	User     string `toml:"user"`
	// PasswordFile holds the password (never in config.toml).
	PasswordFile string           `toml:"password_file"`
	Timeout      cfgtype.Duration `toml:"timeout"`
}

// DefaultConfig asks for a 5 % effect at alpha 0.01 with at most 30 runs
// per kernel, and sends nothing until an operator enables mail.
func DefaultConfig() Config {
	p := stats.DefaultPolicy()
	return Config{
		MinEffect: p.MinEffect, Alpha: p.Alpha,
		Runs: p.Runs, RunsStep: p.RunsStep, MaxRuns: p.MaxRuns, Resamples: p.Resamples,
		From:             "rdmabot <rdmabot@rdmabot.invalid>",
		DocsURL:          "https://github.com/rdmabot/rdmabot",
		TestedBy:         true,
		CCMaintainers:    true,
		MailOutcomes:     DefaultMailOutcomes(),
		FstestsFlaky:     map[string]string{},
		Moderate:         true,
		DailyLimit:       20,
		AuthorDailyLimit: 5,
		ListDailyLimit:   10,
		OptOut:           []string{},
		SMTP:             SMTPConfig{StartTLS: true, Timeout: cfgtype.D(30 * time.Second)},
		Patchwork:        PatchworkConfig{Context: "rdmabot"},
	}
}

// Policy is the statistics part of the configuration.
func (c *Config) Policy() stats.Policy {
	return stats.Policy{MinEffect: c.MinEffect, Alpha: c.Alpha, Runs: c.Runs,
		RunsStep: c.RunsStep, MaxRuns: c.MaxRuns, Resamples: c.Resamples}
}

// Validate reports every setting that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if c.MinEffect <= 0 || c.MinEffect >= 1 {
		errs = append(errs, fmt.Errorf("reports.min_effect must be in (0, 1), got %v", c.MinEffect))
	}
	if c.Alpha <= 0 || c.Alpha >= 0.5 {
		errs = append(errs, fmt.Errorf("reports.alpha must be in (0, 0.5), got %v", c.Alpha))
	}
	if err := c.Policy().Validate(); err != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("reports: %w", err))
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("reports.from %q: %w", c.From, err))
	}
	if c.Contact != "" {
		if _, err := mail.ParseAddress(c.Contact); err != nil {
			errs = append(errs, fmt.Errorf("reports.contact %q: %w", c.Contact, err))
		}
	}
	if c.ArchiveList != "" {
		if _, err := mail.ParseAddress(c.ArchiveList); err != nil {
			errs = append(errs, fmt.Errorf("reports.archive_list %q: %w", c.ArchiveList, err))
		}
	}
	if err := validateMailOutcomes(c.MailOutcomes); err != nil {
		errs = append(errs, err)
	}
	if c.DailyLimit < 0 || c.AuthorDailyLimit < 0 || c.ListDailyLimit < 0 {
		errs = append(errs, fmt.Errorf("reports.daily_limit, reports.author_daily_limit and reports.list_daily_limit must not be negative"))
	}
	for _, a := range c.OptOut {
		if !strings.Contains(a, "@") {
			errs = append(errs, fmt.Errorf("reports.opt_out %q is neither an address nor @domain", a))
		}
	}
	if c.Mail && c.SMTP.Addr == "" {
		errs = append(errs, fmt.Errorf("reports.mail is on but reports.smtp.addr is empty"))
	}
	if c.SMTP.Timeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("reports.smtp.timeout must be positive"))
	}
	if c.Patchwork.URL != "" {
		if !strings.HasPrefix(c.Patchwork.URL, "https://") && !strings.HasPrefix(c.Patchwork.URL, "http://") {
			errs = append(errs, fmt.Errorf("reports.patchwork.url %q is not an http(s) URL", c.Patchwork.URL))
		}
		if c.Patchwork.TokenFile == "" {
			errs = append(errs, fmt.Errorf("reports.patchwork.url is set but reports.patchwork.token_file is empty"))
		}
		if c.Patchwork.Context == "" {
			errs = append(errs, fmt.Errorf("reports.patchwork.context is empty"))
		}
	}
	return errors.Join(errs...)
}
