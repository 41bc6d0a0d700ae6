package reports

import "fmt"

// HealthCounter is a transport count a verdict can rest on: its name in
// the lab's counts (lab.Health.Counters) and what replies call it.
type HealthCounter struct{ Name, Label string }

// HealthCounters are the counts judged, in the order replies show them.
func HealthCounters() []HealthCounter {
	return []HealthCounter{
		{"retrans", "RPC retransmissions"},
		{"timeouts", "RPC timeouts"},
		{"reconnects", "transport reconnects"},
		{"bad_xids", "replies matching no request"},
		{"bad_replies", "bad RPC/RDMA replies"},
		{"server_bad_calls", "calls the server rejected"},
	}
}

// Health sums the transport's counts over a comparison's boots.
type Health struct {
	// BaseBoots and CandBoots are the boots that reported counts.
	BaseBoots int           `json:"base_boots"`
	CandBoots int           `json:"cand_boots"`
	Counts    []HealthCount `json:"counts"`
	// Fault names the counter that made the verdict a REGRESSION: the
	// patched kernel counted it in two or more boots and the base in none.
	Fault string `json:"fault,omitempty"`
}

// HealthCount is one counter's totals and in how many boots it was not zero.
type HealthCount struct {
	Name     string `json:"name"`
	Label    string `json:"label"`
	Base     int    `json:"base"`
	Cand     int    `json:"cand"`
	BaseWith int    `json:"base_with"`
	CandWith int    `json:"cand_with"`
}

// minFaultBoots is how many patched boots must show a count the base
// never shows: one boot alone could be the lab's hiccup (A/A comparisons
// measure how often), two of a handful are the kernel's.
const minFaultBoots = 2

// judgeHealth sums base and cand (one map per boot that reported; nil
// when no boot of either side did) and names the first counter the base
// never showed and the patched kernel showed in minFaultBoots boots.
func judgeHealth(base, cand []map[string]int) *Health {
	if len(base) == 0 || len(cand) == 0 {
		return nil
	}
	h := &Health{BaseBoots: len(base), CandBoots: len(cand)}
	for _, c := range HealthCounters() {
		hc := HealthCount{Name: c.Name, Label: c.Label}
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
		if h.Fault == "" && hc.BaseWith == 0 && hc.CandWith >= minFaultBoots {
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
