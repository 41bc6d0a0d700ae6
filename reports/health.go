package reports

import "fmt"

// HealthCounter is a transport count a verdict can rest on: its name in
// the lab's counts (lab.Health.Counters), what replies call it, and in
// how many boots of the patched kernel it must show (and in none of the
// base's) to decide; 0: shown for context, never deciding.
type HealthCounter struct {
	Name, Label string
	MinBoots    int
}

// HealthCounters are the counts judged, in the order replies show them.
// A retransmission or reconnect in one boot could be the lab's hiccup
// (A/A comparisons measure how often), two of a handful are the
// kernel's; a provider refusing a Send for a full queue, or dropping a
// completion, is the kernel's own accounting at fault in one boot.
func HealthCounters() []HealthCounter {
	return []HealthCounter{
		{"sq_full", "Sends refused: Send Queue full", 1},
		{"cq_full", "completions lost: CQ full", 1},
		{"retrans", "RPC retransmissions", minFaultBoots},
		{"timeouts", "RPC timeouts", minFaultBoots},
		{"reconnects", "transport reconnects", minFaultBoots},
		{"bad_xids", "replies matching no request", minFaultBoots},
		{"bad_replies", "bad RPC/RDMA replies", minFaultBoots},
		{"server_bad_calls", "calls the server rejected", minFaultBoots},
	}
}

// pressureCounters are the pressure profile's: the faults, then what
// shows the load reached the chunk paths and the Send Queue's edge.
func pressureCounters() []HealthCounter {
	return append(HealthCounters(),
		HealthCounter{Name: "write_chunks", Label: "Write chunk segments (client)"},
		HealthCounter{Name: "read_chunks", Label: "Read chunks (client)"},
		HealthCounter{Name: "sq_starve", Label: "Send Queue waits (server, 1000000 = at least)"})
}

// Health sums the transport's counts over a comparison's boots.
type Health struct {
	// BaseBoots and CandBoots are the boots that reported counts.
	BaseBoots int           `json:"base_boots"`
	CandBoots int           `json:"cand_boots"`
	Counts    []HealthCount `json:"counts"`
	// Fault names the counter that made the verdict a REGRESSION: the
	// patched kernel counted it in its MinBoots or more boots and the
	// base in none.
	Fault string `json:"fault,omitempty"`
	// Profile names the lab profile the boots ran ("" the default test;
	// the pressure profile's words otherwise).
	Profile string `json:"profile,omitempty"`
}

// HealthCount is one counter's totals and in how many boots it was not zero.
type HealthCount struct {
	Name     string `json:"name"`
	Label    string `json:"label"`
	Base     int    `json:"base"`
	Cand     int    `json:"cand"`
	BaseWith int    `json:"base_with"`
	CandWith int    `json:"cand_with"`
	// Context: shown for what the load reached, never a fault.
	Context bool `json:"context,omitempty"`
}

// minFaultBoots is how many patched boots must show a network-borne
// count the base never shows.
const minFaultBoots = 2

// judgeHealth sums base and cand (one map per boot that reported; nil
// when no boot of either side did) over counters and names the first
// counter the base never showed and the patched kernel showed in its
// MinBoots boots.
func judgeHealth(base, cand []map[string]int, counters []HealthCounter) *Health {
	if len(base) == 0 || len(cand) == 0 {
		return nil
	}
	h := &Health{BaseBoots: len(base), CandBoots: len(cand)}
	for _, c := range counters {
		hc := HealthCount{Name: c.Name, Label: c.Label, Context: c.MinBoots == 0}
		for _, b := range base {
			hc.Base += b[c.Name]
			if b[c.Name] > 0 {
				hc.BaseWith++
			}
		}
		for _, b := range cand {
			hc.Cand += b[c.Name]
			if b[c.Name] > 0 {
				hc.CandWith++
			}
		}
		if h.Fault == "" && c.MinBoots > 0 && hc.BaseWith == 0 && hc.CandWith >= c.MinBoots {
			h.Fault = c.Name
		}
		h.Counts = append(h.Counts, hc)
	}
	return h
}

// fault is the deciding count, nil when none decided.
func (h *Health) fault() *HealthCount {
	if h == nil || h.Fault == "" {
		return nil
	}
	for i := range h.Counts {
		if h.Counts[i].Name == h.Fault {
			return &h.Counts[i]
		}
	}
	return nil
}

// clean reports whether no boot of either side counted anything.
func (h *Health) clean() bool {
	for _, c := range h.Counts {
		if c.Base+c.Cand > 0 {
			return false
		}
	}
	return true
}

// Boots is "1 boot" or "n boots".
func Boots(n int) string {
	if n == 1 {
		return "1 boot"
	}
	return fmt.Sprintf("%d boots", n)
}

// healthText is the replies' account of the transport: one sentence when
// nothing was counted, else the counts that were not zero.
func healthText(h *Health) (para string, rows [][]string) {
	if h.Profile != "" {
		rows = [][]string{{"count under pressure", "base", "patched"}}
		for _, c := range h.Counts {
			if c.Base+c.Cand == 0 && !c.Context {
				continue
			}
			rows = append(rows, []string{c.Label,
				fmt.Sprintf("%d in %d/%d boots", c.Base, c.BaseWith, h.BaseBoots),
				fmt.Sprintf("%d in %d/%d boots", c.Cand, c.CandWith, h.CandBoots)})
		}
		return fmt.Sprintf("Under Send Queue pressure (%s), the transport and the provider counted (totals, and in how many boots they were not zero):", h.Profile), rows
	}
	if h.clean() {
		return fmt.Sprintf("The transport counted no RPC retransmissions, timeouts, reconnects or bad replies in any of the %s of either kernel.", Boots(h.BaseBoots+h.CandBoots)), nil
	}
	rows = [][]string{{"transport count", "base", "patched"}}
	for _, c := range h.Counts {
		if c.Base+c.Cand == 0 {
			continue
		}
		rows = append(rows, []string{c.Label,
			fmt.Sprintf("%d in %d/%d boots", c.Base, c.BaseWith, h.BaseBoots),
			fmt.Sprintf("%d in %d/%d boots", c.Cand, c.CandWith, h.CandBoots)})
	}
	return "Transport counts over the boots (totals, and in how many boots they were not zero):", rows
}
