package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"temper.codes/temper-train/observe/snapshot"
)

// Real servers from Debian under their own load tools, traced on this
// machine kind with `temper-train observe` (scripts/record-servers.sh;
// testdata/traces/servers/README.md has the runs and the sources of each
// role). The expected classes follow each server's documented thread roles,
// never a name rule inside analyze: MariaDB and PostgreSQL give all their
// threads one name, so those tests take each thread's role from the server's
// own account (roles.tsv) while the trace ran.
const serversDir = "../testdata/traces/servers"

// Class sets the roles allow.
var (
	serving    = []Class{ClassLatencyCritical}
	background = []Class{ClassSporadic}
	// Background threads that do I/O or are woken by the workload: which
	// of the two they look like depends on how much work the window gave
	// them (a WAL writer with little to flush is sporadic).
	ioOrIdle = []Class{ClassIOWakeChain, ClassSporadic}
	// A thread the workload wakes to do its I/O, and whose documented role
	// says it does that work throughout the window.
	ioChain = []Class{ClassIOWakeChain}
)

// serverCase is one committed trace and how its threads' roles are known.
type serverCase struct {
	name string
	// role names a thread's documented role; "" when the server's account
	// does not cover it (a thread born and gone between the role snapshot
	// and the trace's end).
	role func(t *Thread, roles map[int32]string, snap *snapshot.Snapshot) string
	// want lists the classes each role allows.
	want map[string][]Class
	// serving is the number of request-serving threads the load tool drives.
	serving int
	// unknownMax bounds the threads without a role.
	unknownMax int
}

var serverCases = []serverCase{
	{
		// MariaDB 10.11, InnoDB, sysbench oltp_read_write with 8 client
		// threads. Thread-per-connection: each client has its
		// thread/sql/one_connection thread, which runs its queries and
		// blocks reading the socket → request serving. A ninth connection,
		// opened during the trace by the role query itself, ran one query →
		// sporadic. thread/innodb/thread_pool_thread is InnoDB's task pool
		// (asynchronous I/O completions, purge, background tasks) and the
		// page cleaner flushes dirty pages: background I/O, never request
		// serving. main, manager, signal handler, timer and Aria
		// checkpoint threads are housekeeping.
		name: "mariadb",
		role: func(t *Thread, roles map[int32]string, snap *snapshot.Snapshot) string {
			r := roles[t.Tid]
			if r == "thread/sql/one_connection" && !presentAtBegin(snap, t.Tid) {
				return "one_connection (opened in the window)"
			}
			return r
		},
		want: map[string][]Class{
			"thread/sql/one_connection":             serving,
			"one_connection (opened in the window)": background,
			"thread/innodb/thread_pool_thread":      ioOrIdle,
			"thread/innodb/page_cleaner_thread":     ioOrIdle,
			"thread/sql/main":                       background,
			"thread/sql/manager":                    background,
			"thread/sql/signal_handler":             background,
			"thread/sql/slave_deadlock_handler":     background,
			"thread/mysys/statement_timer":          background,
			"thread/aria/checkpoint_background":     background,
		},
		serving:    8,
		unknownMax: 1,
	},
	{
		// PostgreSQL 15, pgbench (TPC-B like) with 8 clients. Process per
		// connection: a client backend ("postgres: <user> <db> [local]
		// <state>") waits for its client's next statement → request
		// serving. The WAL writer, checkpointer and background writer write
		// in the background; with synchronous_commit the backends flush
		// their own commits, so these have little to do in a short window.
		// Launchers and the postmaster wait for rare events.
		name: "postgres",
		role: postgresRole,
		want: map[string][]Class{
			"client backend":               serving,
			"walwriter":                    ioOrIdle,
			"checkpointer":                 ioOrIdle,
			"background writer":            ioOrIdle,
			"autovacuum launcher":          background,
			"logical replication launcher": background,
			"postmaster":                   background,
		},
		serving:    8,
		unknownMax: 2, // autovacuum workers come and go
	},
	{
		// The same PostgreSQL and load with synchronous_commit = off: a
		// backend no longer flushes its own commit record but wakes the
		// WAL writer, which writes and flushes the WAL for it (docs,
		// "Asynchronous Commit"). The WAL writer works in the window, woken
		// by the backends and waiting for the disk: io_wake_chain and
		// nothing else.
		name: "postgres-async",
		role: postgresRole,
		want: map[string][]Class{
			"client backend":               serving,
			"walwriter":                    ioChain,
			"checkpointer":                 ioOrIdle,
			"background writer":            ioOrIdle,
			"autovacuum launcher":          background,
			"logical replication launcher": background,
			"postmaster":                   background,
		},
		serving:    8,
		unknownMax: 2,
	},
	{
		// Redis 7, redis-benchmark SET/GET with 20 clients, AOF on
		// (appendfsync everysec). The main thread runs the event loop and
		// serves every command → request serving. bio_aof_fsync fsyncs the
		// AOF once a second, bio_close_file closes files, bio_lazy_free
		// frees memory; jemalloc_bg_thd purges memory: background. A
		// forked child (the AOF rewrite Redis starts when the file has
		// grown) is background work too.
		name: "redis",
		role: func(t *Thread, _ map[int32]string, snap *snapshot.Snapshot) string {
			if t.Comm == "redis-server" && !slices.Contains(snap.Target.Tgids, int(t.Tgid)) {
				return "forked child"
			}
			return t.Comm
		},
		want: map[string][]Class{
			"redis-server":    serving,
			"bio_aof_fsync":   ioOrIdle,
			"bio_close_file":  ioOrIdle,
			"bio_lazy_free":   ioOrIdle,
			"jemalloc_bg_thd": background,
			"forked child":    {ClassSporadic, ClassSyncCompute},
		},
		serving: 1,
	},
	{
		// memcached 1.6 with 4 worker threads, memaslap (2 threads, 64
		// connections). mc-worker threads serve the connections → request
		// serving. The main thread only accepts new connections (all were
		// open before the window); mc-lrumaint, mc-slabmaint,
		// mc-itemcrawler, mc-assocmaint and mc-log are maintainers.
		// mc-lrumaint ticks often on its own timer without handing work to
		// anyone: housekeeping however often it ticks.
		name: "memcached",
		role: func(t *Thread, _ map[int32]string, _ *snapshot.Snapshot) string { return t.Comm },
		want: map[string][]Class{
			"mc-worker":      serving,
			"memcached":      background,
			"mc-lrumaint":    background,
			"mc-slabmaint":   background,
			"mc-itemcrawler": background,
			"mc-assocmaint":  background,
			"mc-log":         background,
		},
		serving: 4,
	},
}

func TestServerTraces(t *testing.T) {
	for _, sc := range serverCases {
		t.Run(sc.name, func(t *testing.T) {
			a, snap, roles := analyzeServer(t, sc.name)
			unknown := 0
			var servingTids []int32
			seen := map[string]bool{}
			for i := range a.Threads {
				th := &a.Threads[i]
				role := sc.role(th, roles, snap)
				seen[role] = true
				allowed, ok := sc.want[role]
				if !ok {
					if role != "" {
						t.Errorf("%s/%d: role %q has no expectation", th.Comm, th.Tid, role)
					}
					unknown++
					continue
				}
				if !slices.Contains(allowed, th.Class) {
					t.Errorf("%s/%d (%s): class %s, want one of %v (own %s, scores %+v; cpu %.3f, wakes %.1f/s)",
						th.Comm, th.Tid, role, th.Class, allowed, th.OwnClass, th.Scores, th.Features.CPUShare, th.Features.WakeRate)
				}
				if slices.Equal(allowed, serving) {
					servingTids = append(servingTids, th.Tid)
				}
			}
			if unknown > sc.unknownMax {
				t.Errorf("%d threads without a documented role, want ≤ %d", unknown, sc.unknownMax)
			}
			// A role that calls for io_wake_chain alone must be in the trace.
			for role, allowed := range sc.want {
				if slices.Equal(allowed, ioChain) && !seen[role] {
					t.Errorf("no thread has role %q, which must be io_wake_chain", role)
				}
			}
			if len(servingTids) != sc.serving {
				t.Errorf("%d request-serving threads by role, want the %d the load tool drives", len(servingTids), sc.serving)
			}
			// The request-serving threads form the latency_critical
			// clusters, and nothing else is in them.
			for _, c := range a.Clusters {
				if c.Class != ClassLatencyCritical {
					continue
				}
				for _, m := range c.Members {
					if !slices.Contains(servingTids, m) {
						t.Errorf("cluster %d (latency_critical) holds tid %d, which does not serve requests", c.ID, m)
					}
				}
			}
			t.Logf("%s: %d threads, %d clusters, %d events over %.2f s", sc.name, len(a.Threads), len(a.Clusters),
				a.Trace.Events, float64(a.Trace.WindowNs)/1e9)
		})
	}
}

// postgresRole takes a PostgreSQL process's role from its process title.
func postgresRole(t *Thread, roles map[int32]string, _ *snapshot.Snapshot) string {
	r, ok := roles[t.Tid]
	if !ok {
		return ""
	}
	switch r = strings.TrimSpace(strings.TrimPrefix(r, "postgres: ")); r {
	case "postmaster", "checkpointer", "background writer", "walwriter",
		"autovacuum launcher", "logical replication launcher":
		return r
	}
	return "client backend"
}

// TestServerTracesJSON checks the fields other tools score on and that the
// same trace gives byte-identical JSON.
func TestServerTracesJSON(t *testing.T) {
	a, _, _ := analyzeServer(t, "postgres")
	b, _, _ := analyzeServer(t, "postgres")
	var ja, jb bytes.Buffer
	if err := a.Write(&ja); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(&jb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja.Bytes(), jb.Bytes()) {
		t.Fatal("two analyses of the same trace gave different JSON")
	}
	var doc struct {
		Threads []map[string]any `json:"threads"`
	}
	if err := json.Unmarshal(ja.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Threads) == 0 {
		t.Fatal("no threads in the JSON")
	}
	for _, th := range doc.Threads {
		for _, k := range []string{"tid", "tgid", "comm", "cluster", "class"} {
			if _, ok := th[k]; !ok {
				t.Fatalf("thread %v has no %q", th["tid"], k)
			}
		}
		if !Class(th["class"].(string)).Valid() {
			t.Errorf("thread %v: class %q is not one of %v", th["tid"], th["class"], Classes())
		}
	}
}

// analyzeServer analyses a committed server trace with its snapshot and
// reads its roles.tsv when there is one.
func analyzeServer(t *testing.T, name string) (*Analysis, *snapshot.Snapshot, map[int32]string) {
	t.Helper()
	dir := filepath.Join(serversDir, name)
	snap, err := snapshot.Load(filepath.Join(dir, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := File(filepath.Join(dir, "trace.pftrace.gz"), Options{Path: name + "/trace.pftrace.gz", Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	roles := map[int32]string{}
	f, err := os.Open(filepath.Join(dir, "roles.tsv"))
	if os.IsNotExist(err) {
		return a, snap, roles
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tid, role, ok := strings.Cut(sc.Text(), "\t")
		n, err := strconv.Atoi(tid)
		if !ok || err != nil {
			t.Fatalf("%s/roles.tsv: bad line %q", name, sc.Text())
		}
		roles[int32(n)] = role
	}
	return a, snap, roles
}

// presentAtBegin reports whether the snapshot saw the thread when the trace
// started.
func presentAtBegin(s *snapshot.Snapshot, tid int32) bool {
	for _, th := range s.Threads {
		if th.Tid == int(tid) {
			return th.PresentAtBegin
		}
	}
	return false
}
