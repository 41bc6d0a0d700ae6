package bot_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/pgtest"
)

// The orchestration's own cost: series through every job (ingest, test,
// build, lab, report) with stages that take no time, on the embedded
// SQLite and on PostgreSQL, measured in the same run; the ratio is
// printed. Real stages take minutes; this is what the bot adds.
func BenchmarkPipeline(b *testing.B) {
	const series = 10
	run := func(b *testing.B, dbURL string) time.Duration {
		cfg := testConfig()
		h := newHarnessDB(b, cfg, "", dbURL)
		h.lab.Delay = 0
		start := time.Now()
		for i := range series {
			h.ingest.Add(seriesN(i))
		}
		h.wait("replies", 5*time.Minute, func() bool { return h.report.Count() == series })
		return time.Since(start) / series
	}
	for range b.N {
		sq := run(b, "")
		pg := run(b, pgtest.Start(b))
		b.ReportMetric(sq.Seconds(), "s/series-sqlite")
		b.ReportMetric(pg.Seconds(), "s/series-postgres")
		fmt.Printf("per series through 5 jobs: SQLite %v, PostgreSQL %v (PostgreSQL/SQLite %.2f)\n", sq.Round(time.Millisecond), pg.Round(time.Millisecond), pg.Seconds()/sq.Seconds())
	}
}

func seriesN(i int) flow.Series {
	return series(fmt.Sprintf("<bench%d@x>", i), "[PATCH] svcrdma: harmless")
}
