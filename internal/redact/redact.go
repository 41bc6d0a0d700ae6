// Package redact hides the passwords of URLs in text the bot shows or
// logs. Errors of list and tree reads quote their URLs, and an operator's
// imap://user:pass@host with a typo put the password on the dashboard.
package redact

import "strings"

// URLs returns s with the user part of every URL in it hidden: a
// password becomes "xxxxx" as url.URL.Redacted writes it, and a lone
// user name (which may be a token) becomes "xxxxx" too. The user part
// runs from "://" to the last "@" before the URL ends (at a space or a
// quote) that follows a ":" or comes before any "/", "?" or "#": so a
// password holding an unescaped "/" is hidden too, and a lore message
// URL (.../<list>/<id>@<host>/) is left alone.
func URLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			break
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, " \t\r\n\"'`<>")
		if end < 0 {
			end = len(s)
		}
		run := s[:end]
		path := strings.IndexAny(run, "/?#")
		user := -1
		for at := strings.LastIndexByte(run, '@'); at >= 0; at = strings.LastIndexByte(run[:at], '@') {
			if path < 0 || at < path || strings.Contains(run[:at], ":") {
				user = at
				break
			}
		}
		if user < 0 {
			continue
		}
		if name, _, ok := strings.Cut(run[:user], ":"); ok && !strings.ContainsAny(name, "/?#") {
			b.WriteString(name + ":")
		}
		b.WriteString("xxxxx@")
		s = s[user+1:]
	}
	b.WriteString(s)
	return b.String()
}

// Error is err with URLs(err.Error()) for its message; errors.Is and
// errors.As still find what err wraps. nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if msg := URLs(err.Error()); msg != err.Error() {
		return &redacted{msg: msg, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }

// Unwrap gives errors.Is and As the original, whose own message still
// holds the password: callers show Error(), never the unwrapped text.
func (r *redacted) Unwrap() error { return r.err }
