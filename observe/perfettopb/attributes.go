package perfettopb

// Trace attributes temper-train writes (TracePacket.trace_attributes);
// trace_processor lists each as metadata "trace_attribute.<key>".
const (
	// SwitchesAttribute is "filtered" in a trace that holds only the
	// switches involving its targets (observe --filter-switches): a CPU's
	// switches do not chain, so trace_processor counts
	// mismatched_sched_switch_tids on it.
	SwitchesAttribute = "temper_train.switches"
	SwitchesFiltered  = "filtered"
)
