package wire

import (
	"log/slog"
	"time"

	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// NewReplier is the reply policy as cfg configures it: the lab and the
// kernels described from their configuration, a series' thread read by
// lore. ob is nil where nothing is delivered (the A/A runner decides
// only); the compiler and MAINTAINERS come with the build role.
func NewReplier(cfg Config, ob *outbox.Outbox, log *slog.Logger) *reply.Replier {
	r := &reply.Replier{Cfg: cfg.Reports, Outbox: ob, Lab: cfg.Lab,
		Sides: sides{}, Limits: cfg.Lab, TreeURLs: map[string]string{}, Log: log, Now: time.Now,
		Kernels: reply.Kernels{Config: kbuild.ConfigWords(cfg.Lab.Default, cfg.Reports.DocsURL),
			DebugConfig: kbuild.ConfigWords(kbuild.DebugLab(cfg.Lab.Default), cfg.Reports.DocsURL)}}
	for _, l := range cfg.Lore.Lists {
		r.Lists = append(r.Lists, l.Address)
		if l.Reply == lore.ReplyMaintainers {
			r.MaintainersOnly = append(r.MaintainersOnly, l.Address)
		}
	}
	for _, t := range cfg.Builder.Trees {
		r.TreeURLs[t.Name] = t.URL
	}
	return r
}

// sides is where a series' kernel boots, as the lab runner chooses it
// (reply.Sides).
type sides struct{}

func (sides) CandidateSide(s flow.Series) string { return seriesSide(s) }
