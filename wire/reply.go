package wire

import (
	"log/slog"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// NewReplier is the reply policy as cfg configures it: the lab and the
// kernels described from their configuration, a series' thread read by
// lore. ob is nil where nothing is delivered (the A/A runner decides
// only); the compiler and MAINTAINERS come with the build role.
func NewReplier(cfg Config, ob *outbox.Outbox, log *slog.Logger) *reply.Replier {
	r := &reply.Replier{Cfg: cfg.Reports, Outbox: ob, Lab: cfg.Lab, Mail: seriesMail{lists: cfg.Lore.Lists},
		Sides: sides{}, TreeURLs: map[string]string{}, Log: log, Now: time.Now,
		Kernels: reply.Kernels{Config: kbuild.ConfigWords(cfg.Lab.Default, cfg.Reports.DocsURL),
			DebugConfig: kbuild.ConfigWords(kbuild.DebugLab(cfg.Lab.Default), cfg.Reports.DocsURL)}}
	for _, l := range cfg.Lore.Lists {
		r.Lists = append(r.Lists, l.Address)
	}
	for _, t := range cfg.Builder.Trees {
		r.TreeURLs[t.Name] = t.URL
	}
	return r
}

// seriesMail reads a series' messages for its replies with lore's
// parser (reply.Mail).
type seriesMail struct{ lists []lore.ListConfig }

// Thread is the series' thread: its root's subject, Message-ID,
// References and author, each patch's Message-ID and subject, and the
// configured lists its root was sent to.
func (m seriesMail) Thread(s *flow.Series) (reports.Thread, error) {
	root, err := lore.Root(s.Cover, s.Patches)
	if err != nil {
		return reports.Thread{}, err
	}
	t := reports.Thread{Subject: root.Subject, MessageID: root.MessageID, References: root.References,
		Author: reports.Address{Name: root.From.Name, Email: root.From.Email}, Version: s.Version, LoreURL: s.Link}
	if t.Version == 0 {
		t.Version = 1
	}
	for _, p := range s.Patches {
		var pm reports.Patch
		if msg, err := lore.ParseMessage(p); err == nil {
			pm = reports.Patch{MessageID: msg.MessageID, Subject: msg.Subject}
		}
		t.Patches = append(t.Patches, pm)
	}
	seen := map[string]bool{}
	for _, a := range append(append([]flow.Address(nil), root.To...), root.Cc...) {
		for _, l := range m.lists {
			if strings.EqualFold(a.Email, l.Address) && !seen[l.Address] {
				t.Lists = append(t.Lists, l.Address)
				seen[l.Address] = true
			}
		}
	}
	return t, nil
}

// ChangedFiles are the files the series' patches change.
func (seriesMail) ChangedFiles(s flow.Series) []string {
	var files []string
	for _, raw := range s.Patches {
		if msg, err := lore.ParseMessage(raw); err == nil {
			files = append(files, lore.DiffFiles(msg.Body)...)
		}
	}
	return files
}

// sides is where a series' kernel boots, as the lab runner chooses it
// (reply.Sides).
type sides struct{}

func (sides) CandidateSide(s flow.Series) string { return seriesSide(s) }
