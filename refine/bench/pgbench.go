package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// pgbench parses pgbench (PostgreSQL 15): throughput from the "tps = " line of
// its report, errors from its failed and skipped transaction counts, and the
// latency percentiles from its per-transaction log, which Prepare has it write
// into the trial's scratch directory (-l --log-prefix=DIR/pgbench_log). One
// file is written per pgbench thread, pgbench_log.PID and pgbench_log.PID.N;
// a line is
//
//	client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]
//
// where time is the transaction's latency in µs, or "skipped"/"failed". The
// percentiles are exact (nearest-rank over every logged transaction).
//
// With -R (--rate) pgbench schedules transactions on a Poisson clock and
// measures each from its scheduled start (the logged time includes the
// schedule lag), so the run is open-loop.
type pgbench struct{}

func (pgbench) Name() string { return "pgbench" }

const pgbenchLogPrefix = "pgbench_log"

func (p pgbench) Prepare(argv []string, dir string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("pgbench: a trial scratch directory is needed for its transaction log")
	}
	for _, f := range []string{"--log-prefix", "--aggregate-interval"} {
		if hasFlag(argv, false, f) {
			return nil, fmt.Errorf("pgbench: remove %s from the command: the per-transaction log is written by refine into the trial's directory", f)
		}
	}
	if hasFlag(argv, false, "-l", "--log") {
		argv = slices.DeleteFunc(slices.Clone(argv), func(a string) bool { return a == "-l" || a == "--log" })
	}
	abs, err := filepath.Abs(filepath.Join(dir, pgbenchLogPrefix))
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	return insertAfterCommand(argv, "-l", "--log-prefix="+abs), nil
}

func (p pgbench) Parse(t Trial) (Result, error) {
	lines := splitLines(t.Stdout)
	perr := func(l line, format string, args ...any) error {
		return &ParseError{Tool: p.Name(), Line: l.n, Text: l.text, Msg: fmt.Sprintf(format, args...)}
	}
	res := Result{Tool: p.Name(), Metrics: map[string]float64{}, OpenLoop: hasFlag(t.Argv, true, "-R", "--rate")}
	processed, errorsSeen, haveTPS, haveProcessed := 0.0, 0.0, false, false
	for _, l := range lines {
		text := strings.TrimSpace(l.text)
		switch {
		case strings.HasPrefix(text, "tps = "):
			// tps = 409.491017 (without initial connection time)
			f := strings.Fields(text)
			v, ok := parseNumber(f[2])
			if !ok {
				return Result{}, perr(l, "tps %s", notFigure(f[2], strconv.Quote(f[2])+" is not a number"))
			}
			res.Metrics["throughput"], haveTPS = v, true
		case strings.HasPrefix(text, "number of transactions actually processed:"):
			// ...: 1214 (with -T), or 400/400 (with -t)
			f := strings.Fields(text)
			n, _, _ := strings.Cut(f[len(f)-1], "/")
			v, ok := parseNumber(n)
			if !ok {
				return Result{}, perr(l, "transaction count %s", notFigure(n, strconv.Quote(n)+" is not a number"))
			}
			processed, haveProcessed = v, true
		case strings.HasPrefix(text, "number of failed transactions:"),
			strings.HasPrefix(text, "number of transactions skipped:"):
			// number of failed transactions: 0 (0.000%)
			_, after, _ := strings.Cut(text, ":")
			f := strings.Fields(after)
			var v float64
			ok := len(f) > 0
			if ok {
				v, ok = parseNumber(f[0])
			}
			if !ok && len(f) > 0 {
				return Result{}, perr(l, "%s", notFigure(f[0], "expected a count after the colon"))
			}
			if !ok {
				return Result{}, perr(l, "expected a count after the colon")
			}
			errorsSeen += v
		}
	}
	if !haveTPS || !haveProcessed {
		return Result{}, &ParseError{Tool: p.Name(), Line: endLine(lines), Msg: "output ends without the \"number of transactions actually processed\" and \"tps = \" lines (truncated, or the run was aborted)"}
	}
	res.Metrics["errors"] = errorsSeen
	lat, err := p.readLogs(t)
	if err != nil {
		return Result{}, err
	}
	// pgbench logs every transaction unless told to sample; a log that
	// disagrees with the report was cut short.
	if !hasFlag(t.Argv, false, "--sampling-rate") && float64(len(lat)) != processed {
		return Result{}, &ParseError{Tool: p.Name(), File: pgbenchLogPrefix + ".*", Line: 0,
			Msg: fmt.Sprintf("the transaction logs hold %d completed transactions, the report %.0f (truncated log?)", len(lat), processed)}
	}
	if len(lat) == 0 {
		return Result{}, &ParseError{Tool: p.Name(), File: pgbenchLogPrefix + ".*", Line: 0, Msg: "no completed transaction logged"}
	}
	slices.Sort(lat)
	summarize(res.Metrics, lat)
	return res, nil
}

// readLogs reads the latencies (ms) of completed transactions from the logs
// of the run: those named by its pid, or, when the pid is unknown or names
// none (a wrapper ran pgbench), the only run's logs in the directory.
func (p pgbench) readLogs(t Trial) ([]float64, error) {
	paths, err := filepath.Glob(filepath.Join(t.Dir, pgbenchLogPrefix+".*"))
	if err != nil {
		return nil, fmt.Errorf("pgbench logs: %w", err)
	}
	byPid := map[string][]string{}
	for _, path := range paths {
		rest := strings.TrimPrefix(filepath.Base(path), pgbenchLogPrefix+".")
		pid, _, _ := strings.Cut(rest, ".")
		byPid[pid] = append(byPid[pid], path)
	}
	files := byPid[strconv.Itoa(t.Pid)]
	if files == nil && len(byPid) == 1 {
		for _, f := range byPid {
			files = f
		}
	}
	if files == nil {
		return nil, &ParseError{Tool: p.Name(), File: pgbenchLogPrefix + ".*", Line: 0,
			Msg: fmt.Sprintf("found the transaction logs of %d runs in %s, none of pid %d (was -l --log-prefix removed by a wrapper?)", len(byPid), t.Dir, t.Pid)}
	}
	slices.Sort(files)
	var lat []float64
	for _, path := range files {
		var err error
		if lat, err = p.readLog(path, lat); err != nil {
			return nil, err
		}
	}
	return lat, nil
}

func (p pgbench) readLog(path string, lat []float64) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pgbench log: %w", err)
	}
	defer f.Close()
	return p.parseLog(filepath.Base(path), f, lat)
}

// parseLog appends the latencies (ms) of the completed transactions in one
// log to lat.
func (p pgbench) parseLog(name string, r io.Reader, lat []float64) ([]float64, error) {
	sc := bufio.NewScanner(r)
	n := 0
	perr := func(text, format string, args ...any) error {
		return &ParseError{Tool: p.Name(), File: name, Line: n, Text: text, Msg: fmt.Sprintf(format, args...)}
	}
	for sc.Scan() {
		n++
		text := sc.Text()
		f := strings.Fields(text)
		if len(f) < 6 || len(f) > 8 {
			return nil, perr(text, "expected \"client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]\"")
		}
		for _, i := range []int{0, 1, 3, 4, 5} {
			if _, err := strconv.ParseUint(f[i], 10, 64); err != nil {
				return nil, perr(text, "field %d %s", i+1, notFigure(f[i], strconv.Quote(f[i])+" is not a whole number"))
			}
		}
		if f[2] == "skipped" || f[2] == "failed" {
			continue
		}
		us, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, perr(text, "latency %s", notFigure(f[2], strconv.Quote(f[2])+" is neither microseconds nor skipped/failed"))
		}
		lat = append(lat, float64(us)/1000)
	}
	if err := sc.Err(); err != nil {
		n++
		return nil, perr("", "%v", err)
	}
	return lat, nil
}
