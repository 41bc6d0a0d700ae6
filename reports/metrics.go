package reports

// DecidedMetric is a lab metric a verdict rests on: its name in the
// lab's figures (lab.Figures), the label and unit replies show, and which
// way is better.
type DecidedMetric struct {
	Name, Label, Unit string
	HigherIsBetter    bool
}

// DecidedMetrics are the metrics verdicts rest on, in the order replies
// show them: both copies' throughput together (about 2.5 % boot-to-boot
// spread in quiet mode, where write and read alone spread 4-6 %) and the
// whole loop's seconds (under 1 %). Write and read alone stay in the
// samples for the run page. A fio run has only read bandwidth, which is
// decided on only where there is no copy figure.
func DecidedMetrics() []DecidedMetric {
	return []DecidedMetric{
		{"copy_MBps", "copy", "MB/s", true},
		{"loop_s", "loop", "s", false},
		{"read_MBps", "read", "MB/s", true},
	}
}
