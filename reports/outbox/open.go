package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/reports"
)

// Open builds the outbox the [reports] section describes over the bot's
// database: the Maildir (<dataDir>/outbox unless set), the policy, an
// SMTP sender when an address is configured, and a GitHub sender when gh
// is not nil, a patchwork sender when [reports.patchwork] has a URL.
func Open(ctx context.Context, db *sql.DB, c *reports.Config, dataDir string, gh *github.Client, now func() time.Time, log *slog.Logger) (*Outbox, error) {
	l, err := OpenLedger(ctx, db)
	if err != nil {
		return nil, err
	}
	dir := c.Outbox
	if dir == "" {
		dir = filepath.Join(dataDir, "outbox")
	}
	senders := map[string]Sender{}
	if c.SMTP.Addr != "" {
		from, err := mail.ParseAddress(c.From)
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		s := &SMTP{Addr: c.SMTP.Addr, StartTLS: c.SMTP.StartTLS, User: c.SMTP.User, From: from.Address, Timeout: c.SMTP.Timeout.Duration}
		if c.SMTP.PasswordFile != "" {
			b, err := os.ReadFile(c.SMTP.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("outbox: smtp password: %w", err)
			}
			s.Password = strings.TrimSpace(string(b))
		}
		senders["email"] = s
	}
	if gh != nil {
		senders["github"] = NewGitHub(gh, log)
	}
	if c.Patchwork.URL != "" {
		b, err := os.ReadFile(c.Patchwork.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("outbox: patchwork token: %w", err)
		}
		senders["patchwork"] = &Patchwork{URL: c.Patchwork.URL, Token: strings.TrimSpace(string(b)), HTTP: &http.Client{Timeout: time.Minute}}
	}
	p := Policy{Send: c.Mail, Moderate: c.Moderate, DailyLimit: c.DailyLimit, AuthorDailyLimit: c.AuthorDailyLimit, ListDailyLimit: c.ListDailyLimit, OptOut: c.OptOut, Self: c.From}
	return New(l, dir, p, senders, now, log)
}
