package lore

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseSubject(t *testing.T) {
	tests := []struct {
		in   string
		want Subject
	}{
		{"[PATCH rdma-next v1 0/2] Enable relaxed ordering for ULPs",
			Subject{Prefixes: []string{"PATCH rdma-next v1 0/2"}, Patch: true, Version: 1, Index: 0, Total: 2,
				Tags: []string{"rdma-next"}, Title: "Enable relaxed ordering for ULPs"}},
		{"[PATCH v2 rdma-next] RDMA/mlx5: Enable Relaxed Ordering by default",
			Subject{Prefixes: []string{"PATCH v2 rdma-next"}, Patch: true, Version: 2, Tags: []string{"rdma-next"},
				Title: "RDMA/mlx5: Enable Relaxed Ordering by default"}},
		{"[PATCH v2 09/12] svcrdma: Move write_info",
			Subject{Prefixes: []string{"PATCH v2 09/12"}, Patch: true, Version: 2, Index: 9, Total: 12, Title: "svcrdma: Move write_info"}},
		{"[RFC PATCH 04/15] net: hbl_cn: x",
			Subject{Prefixes: []string{"RFC PATCH 04/15"}, Patch: true, RFC: true, Version: 1, Index: 4, Total: 15, Title: "net: hbl_cn: x"}},
		{"[PATCH net-next v10 1/2] a",
			Subject{Prefixes: []string{"PATCH net-next v10 1/2"}, Patch: true, Version: 10, Index: 1, Total: 2, Tags: []string{"net-next"}, Title: "a"}},
		{"Re: [PATCH rdma-next v1 2/2] RDMA/mlx5: Allow",
			Subject{IsReply: true, Prefixes: []string{"PATCH rdma-next v1 2/2"}, Patch: true, Version: 1, Index: 2, Total: 2,
				Tags: []string{"rdma-next"}, Title: "RDMA/mlx5: Allow"}},
		{"RE: [PATCH v2 rdma-next] x",
			Subject{IsReply: true, Prefixes: []string{"PATCH v2 rdma-next"}, Patch: true, Version: 2, Tags: []string{"rdma-next"}, Title: "x"}},
		{"Fw: [Bug 218743] New: NFS-RDMA-Connected Regression",
			Subject{IsForward: true, Prefixes: []string{"Bug 218743"}, Version: 1, Tags: []string{"Bug", "218743"},
				Title: "Fw: [Bug 218743] New: NFS-RDMA-Connected Regression"}},
		{"[PATCHv3 for-rc 3/5] IB/core: y",
			Subject{Prefixes: []string{"PATCHv3 for-rc 3/5"}, Patch: true, Version: 3, Index: 3, Total: 5, Tags: []string{"for-rc"}, Title: "IB/core: y"}},
		{"[PATCH RESEND v2 nfsd 1/1] z",
			Subject{Prefixes: []string{"PATCH RESEND v2 nfsd 1/1"}, Patch: true, Resend: true, Version: 2, Index: 1, Total: 1, Tags: []string{"nfsd"}, Title: "z"}},
		{"[PATCH net-next,v3 2/4] w",
			Subject{Prefixes: []string{"PATCH net-next,v3 2/4"}, Patch: true, Version: 3, Index: 2, Total: 4, Tags: []string{"net-next"}, Title: "w"}},
		{"[PATCH] [rdma-rc] two groups",
			Subject{Prefixes: []string{"PATCH", "rdma-rc"}, Patch: true, Version: 1, Tags: []string{"rdma-rc"}, Title: "two groups"}},
		{"Re: Re:  [PATCH]   squeezed   title ",
			Subject{IsReply: true, Prefixes: []string{"PATCH"}, Patch: true, Version: 1, Title: "squeezed title"}},
		{"[PATCH 1/2 v2] version after index",
			Subject{Prefixes: []string{"PATCH 1/2 v2"}, Patch: true, Version: 2, Index: 1, Total: 2, Title: "version after index"}},
		{"[GIT PULL] Please pull rdma.git",
			Subject{Prefixes: []string{"GIT PULL"}, Pull: true, Version: 1, Tags: []string{"GIT", "PULL"}, Title: "Please pull rdma.git"}},
		{"[GIT,PULL] nfsd changes for v6.10",
			Subject{Prefixes: []string{"GIT,PULL"}, Pull: true, Version: 1, Tags: []string{"GIT", "PULL"}, Title: "nfsd changes for v6.10"}},
		{"[PATCHSET RFC v2 00/10] nfsd: x",
			Subject{Prefixes: []string{"PATCHSET RFC v2 00/10"}, Patch: true, RFC: true, Version: 2, Index: 0, Total: 10, Title: "nfsd: x"}},
		{"[PATCHES] two fixes",
			Subject{Prefixes: []string{"PATCHES"}, Patch: true, Version: 1, Title: "two fixes"}},
		{"[PATCHSETv3 0/2] y",
			Subject{Prefixes: []string{"PATCHSETv3 0/2"}, Patch: true, Version: 3, Total: 2, Title: "y"}},
		{"[unclosed bracket", Subject{Version: 1, Title: "[unclosed bracket"}},
		{"", Subject{Version: 1}},
	}
	for _, tc := range tests {
		got := ParseSubject(tc.in)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tc.want)
		if string(gj) != string(wj) {
			t.Errorf("ParseSubject(%q)\n got %s\nwant %s", tc.in, gj, wj)
		}
	}
}

func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{
		"[PATCH rdma-next v1 0/2] Enable", "Re: [PATCH v2 09/12] x", "[RFC PATCHv3 for-next 04/15] y",
		"Fw: [Bug 1] New:", "[", "]", "re:", "[PATCH v99999999999999999999 1/2] z", "[PATCH 00001/00002]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseSubject(s)
		if got.Version < 0 || got.Index < 0 || got.Total < 0 {
			t.Fatalf("negative numbers in %+v", got)
		}
		if again := ParseSubject(got.Title).Title; again != got.Title {
			t.Fatalf("Title not idempotent: %q -> %q -> %q", s, got.Title, again)
		}
		if strings.TrimSpace(got.Title) != got.Title {
			t.Fatalf("Title %q has outer blanks", got.Title)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got.Title) {
			t.Fatalf("Title %q of valid input is not UTF-8", got.Title)
		}
	})
}
