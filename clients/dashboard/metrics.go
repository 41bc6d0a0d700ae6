package dashboard

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// metrics writes the Prometheus text exposition format (version 0.0.4)
// by hand: queue depth by queue and state, job attempt durations by kind
// and outcome, lab pair utilization.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var b strings.Builder

	// River's table: one row per job. The states are River's own.
	rows, err := s.st.DB.QueryContext(ctx, `SELECT queue, state, COUNT(*) FROM river_job GROUP BY queue, state`)
	if err != nil {
		s.fail(w, err)
		return
	}
	type qs struct{ queue, state string }
	depth := map[qs]int64{}
	for rows.Next() {
		var k qs
		var n int64
		if err := rows.Scan(&k.queue, &k.state, &n); err != nil {
			rows.Close()
			s.fail(w, err)
			return
		}
		depth[k] = n
	}
	rows.Close()
	keys := make([]qs, 0, len(depth))
	for k := range depth {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].queue+keys[i].state < keys[j].queue+keys[j].state
	})
	b.WriteString("# HELP rdmabot_jobs Jobs by queue and state (available, running, retryable... are the queue depth).\n")
	b.WriteString("# TYPE rdmabot_jobs gauge\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "rdmabot_jobs{queue=%q,state=%q} %d\n", k.queue, k.state, depth[k])
	}

	stats, err := s.st.JobStats(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	b.WriteString("# HELP rdmabot_job_duration_seconds Time spent in job attempts, by kind and outcome.\n")
	b.WriteString("# TYPE rdmabot_job_duration_seconds summary\n")
	for _, j := range stats {
		fmt.Fprintf(&b, "rdmabot_job_duration_seconds_sum{kind=%q,outcome=%q} %g\n", j.Kind, j.Outcome, j.Total.Seconds())
		fmt.Fprintf(&b, "rdmabot_job_duration_seconds_count{kind=%q,outcome=%q} %d\n", j.Kind, j.Outcome, j.Count)
	}

	usage, err := s.st.LabUsages(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	leases, err := s.st.Leases(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	b.WriteString("# HELP rdmabot_lab_busy_seconds_total Time each lab pair was leased to a job.\n")
	b.WriteString("# TYPE rdmabot_lab_busy_seconds_total counter\n")
	for _, u := range usage {
		fmt.Fprintf(&b, "rdmabot_lab_busy_seconds_total{pair=%q} %g\n", u.Pair, u.Busy.Seconds())
	}
	b.WriteString("# HELP rdmabot_lab_leases_total Leases of each lab pair that ended.\n")
	b.WriteString("# TYPE rdmabot_lab_leases_total counter\n")
	for _, u := range usage {
		fmt.Fprintf(&b, "rdmabot_lab_leases_total{pair=%q} %d\n", u.Pair, u.Runs)
	}
	b.WriteString("# HELP rdmabot_lab_leased Whether a lab pair is leased now.\n")
	b.WriteString("# TYPE rdmabot_lab_leased gauge\n")
	now := s.st.Now()
	for _, l := range leases {
		v := 0
		if l.Expires.After(now) {
			v = 1
		}
		fmt.Fprintf(&b, "rdmabot_lab_leased{pair=%q} %d\n", l.Pair, v)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
