package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
)

// pgTool finds a PostgreSQL server program: Debian keeps them off PATH, in
// /usr/lib/postgresql/VERSION/bin.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if m, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql/*/bin", name)); len(m) > 0 {
		return m[len(m)-1]
	}
	return need.Tool(t, name, "postgresql")
}

func startRedis(t *testing.T) int {
	t.Helper()
	server := need.Tool(t, "redis-server", "redis-server")
	port := testkit.FreePort(t)
	srv := testkit.StartServer(t, server, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	testkit.WaitPort(t, port, 30*time.Second, srv.Exited)
	return port
}

func TestRunRedisBenchmark(t *testing.T) {
	rb := need.Tool(t, "redis-benchmark", "redis-tools")
	port := startRedis(t)
	res, err := Run(context.Background(), Command{
		Argv:    []string{rb, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-n", "5000", "-c", "8", "-t", "get"},
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Tool != "redis-benchmark" || res.OpenLoop {
		t.Errorf("Tool %q OpenLoop %v; want redis-benchmark, closed-loop", res.Tool, res.OpenLoop)
	}
	for _, k := range []string{"throughput", "p50_ms", "p99_ms", "mean_ms", "max_ms", "GET/p99_ms"} {
		if v, ok := res.Metrics[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
		}
	}
	checkOrdered(t, res.Metrics)
}

// TestRunRedisBenchmarkNoServer: redis-benchmark with nothing to connect to
// does not exit (7.0 keeps retrying): the trial times out, and the tool is
// killed.
func TestRunRedisBenchmarkNoServer(t *testing.T) {
	rb := need.Tool(t, "redis-benchmark", "redis-tools")
	marker := markEnv(t)
	start := time.Now()
	_, err := Run(context.Background(), Command{
		Argv:    []string{rb, "-h", "127.0.0.1", "-p", strconv.Itoa(testkit.FreePort(t)), "-n", "1000", "-t", "get"},
		Timeout: 2 * time.Second,
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	noneLeft(t, marker)
}

// pgCluster is a throwaway PostgreSQL cluster owned by the postgres user.
func startPostgres(t *testing.T) (port int, user string) {
	t.Helper()
	initdb := pgTool(t, "initdb")
	postgres := pgTool(t, "postgres")
	pg, err := lookupPostgresUser()
	if err != nil {
		need.Unmet(t, "a postgres user to run the server as", err.Error()+" (apt-get install postgresql creates it)")
	}
	dir, err := os.MkdirTemp("", "bench-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, pg.uid, pg.gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	init := exec.Command(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	init.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(pg.uid), Gid: uint32(pg.gid)}}
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port = testkit.FreePort(t)
	cmd := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(pg.uid), Gid: uint32(pg.gid)}, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	exited := make(chan struct{})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// SIGINT is PostgreSQL's fast shutdown.
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	testkit.WaitPort(t, port, 30*time.Second, exited)
	// The port opens before the server takes connections ("the database
	// system is starting up", seen in CI): pg_isready says when it does.
	ready := pgTool(t, "pg_isready")
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, err := exec.Command(ready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres").CombinedOutput()
		if err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("postgres exited while starting")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres on port %d is not ready after 30s: pg_isready: %v %s", port, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return port, "postgres"
}

type ids struct{ uid, gid int }

func lookupPostgresUser() (ids, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return ids{}, fmt.Errorf("no postgres user (apt-get install postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Geteuid() != 0 {
		return ids{}, errors.New("running PostgreSQL as its user needs root")
	}
	return ids{uid, gid}, nil
}

func TestRunPgbench(t *testing.T) {
	pgb := need.Tool(t, "pgbench", "postgresql-client")
	port, user := startPostgres(t)
	conn := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", user}
	if out, err := exec.Command(pgb, append(append([]string{"-i", "-s", "1", "-q"}, conn...), "postgres")...).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		name string
		args []string
		open bool
	}{
		{"closed", []string{"-c", "2", "-j", "2", "-T", "2"}, false},
		{"open", []string{"-c", "2", "-j", "1", "-T", "2", "-R", "100"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			argv := append(append(append([]string{pgb}, conn...), tt.args...), "postgres")
			res, err := Run(context.Background(), Command{Argv: argv, Timeout: time.Minute, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", res)
			if res.OpenLoop != tt.open {
				t.Errorf("OpenLoop = %v, want %v", res.OpenLoop, tt.open)
			}
			for _, k := range []string{"throughput", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms"} {
				if v, ok := res.Metrics[k]; !ok || v <= 0 {
					t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
				}
			}
			if v, ok := res.Metrics["errors"]; !ok || v != 0 {
				t.Errorf("errors = %v (given %v), want 0", v, ok)
			}
			checkOrdered(t, res.Metrics)
			logs, _ := filepath.Glob(filepath.Join(dir, pgbenchLogPrefix+".*"))
			if len(logs) == 0 {
				t.Errorf("no transaction log in the trial dir %s", dir)
			}
		})
	}
	// A failed run is an error carrying pgbench's own last word.
	t.Run("no server", func(t *testing.T) {
		argv := []string{pgb, "-h", "127.0.0.1", "-p", strconv.Itoa(testkit.FreePort(t)), "-U", user, "-T", "1", "postgres"}
		_, err := Run(context.Background(), Command{Argv: argv, Timeout: time.Minute, Dir: t.TempDir()})
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "pgbench: error: could not create connection") {
			t.Fatalf("err = %v; want an exit error with pgbench's message", err)
		}
		t.Log(err)
	})
}

func TestRunMemaslap(t *testing.T) {
	mc := need.Tool(t, "memcached", "memcached")
	slap := need.Tool(t, "memcaslap", "libmemcached-tools")
	port := testkit.FreePort(t)
	srv := testkit.StartServer(t, mc, "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-u", "nobody")
	testkit.WaitPort(t, port, 30*time.Second, srv.Exited)
	res, err := Run(context.Background(), Command{
		Argv:    []string{slap, "-s", fmt.Sprintf("127.0.0.1:%d", port), "-T", "2", "-c", "8", "-t", "2s"},
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	for _, k := range []string{"throughput", "p50_ms", "p99_ms", "mean_ms", "max_ms"} {
		if v, ok := res.Metrics[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
		}
	}
	checkOrdered(t, res.Metrics)
}

func TestRunSysbenchCPU(t *testing.T) {
	sb := need.Tool(t, "sysbench", "sysbench")
	res, err := Run(context.Background(), Command{Argv: []string{sb, "--threads=1", "--time=1", "cpu", "run"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	for _, k := range []string{"throughput", "p99_ms", "mean_ms", "max_ms"} {
		if v, ok := res.Metrics[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
		}
	}
}

func TestRunWrk(t *testing.T) {
	w := need.Tool(t, "wrk", "wrk")
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(rw, r)
			return
		}
		rw.Write([]byte("hello\n"))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		path   string
		errors bool
	}{{"/", false}, {"/missing", true}} {
		res, err := Run(context.Background(), Command{Argv: []string{w, "-t1", "-c4", "-d1s", srv.URL + tt.path}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", tt.path, res)
		for _, k := range []string{"throughput", "p50_ms", "p99_ms", "mean_ms", "max_ms"} {
			if v, ok := res.Metrics[k]; !ok || v <= 0 {
				t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
			}
		}
		if got := res.Metrics["errors"] > 0; got != tt.errors {
			t.Errorf("%s: errors = %v", tt.path, res.Metrics["errors"])
		}
	}
}

func TestRunSysbenchMariaDB(t *testing.T) {
	sb := need.Tool(t, "sysbench", "sysbench")
	installDB := need.Tool(t, "mariadb-install-db", "mariadb-server")
	mariadbd := need.Tool(t, "mariadbd", "mariadb-server")
	need.Root(t, "to run mariadbd with --user=root")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(installDB, "--no-defaults", "--datadir="+data, "--user=root", "--auth-root-authentication-method=normal").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := testkit.FreePort(t)
	srv := testkit.StartServer(t, mariadbd, "--no-defaults", "--datadir="+data, "--user=root", "--bind-address=127.0.0.1",
		"--port="+strconv.Itoa(port), "--socket="+filepath.Join(dir, "sock"), "--skip-log-bin", "--innodb-buffer-pool-size=64M")
	testkit.WaitPort(t, port, 30*time.Second, srv.Exited)
	common := []string{"--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-port=" + strconv.Itoa(port), "--mysql-user=root", "--mysql-db=mysql", "--tables=1", "--table-size=2000"}
	if out, err := exec.Command(sb, append(common, "oltp_read_write", "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	res, err := Run(context.Background(), Command{
		Argv:    append(append([]string{sb}, common...), "--threads=2", "--time=2", "oltp_read_write", "run"),
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	for _, k := range []string{"throughput", "qps", "p99_ms", "mean_ms", "max_ms"} {
		if v, ok := res.Metrics[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (given %v), want > 0", k, v, ok)
		}
	}
	// oltp_read_write's two threads may deadlock now and then: sysbench
	// retries and counts them as ignored errors, so only presence is checked.
	if _, ok := res.Metrics["errors"]; !ok {
		t.Error("no errors metric")
	}
	checkOrdered(t, res.Metrics)
}

// markEnv sets an environment variable that the commands a test runs
// inherit, so that whatever they leave behind can be found in /proc.
func markEnv(t *testing.T) string {
	marker := fmt.Sprintf("BENCH_TEST_MARK=%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	k, v, _ := strings.Cut(marker, "=")
	t.Setenv(k, v)
	return marker
}

// noneLeft fails the test if any process carries the marker.
func noneLeft(t *testing.T, marker string) {
	t.Helper()
	var left []int
	// SIGKILLed processes may take a moment to be reaped by init.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
			if err != nil {
				continue
			}
			for _, kv := range strings.Split(string(env), "\x00") {
				if kv == marker {
					left = append(left, pid)
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left running: %v", left)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestRunFailures(t *testing.T) {
	jl, _ := Lookup("jsonl")
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		check   func(error) bool
		want    string
	}{
		{"exit status", `echo '{"metric": "p99_ms", "value": 1}'; echo "first" >&2; echo "boom: the server went away" >&2; exit 3`, time.Minute,
			func(err error) bool { var ee *exec.ExitError; return errors.As(err, &ee) }, "exit status 3: boom: the server went away"},
		{"killed", `echo '{"metric": "p99_ms", "value": 1}'; kill -9 $$`, time.Minute,
			func(err error) bool { var ee *exec.ExitError; return errors.As(err, &ee) }, "signal: killed"},
		{"no stderr", `echo "last words on stdout"; exit 1`, time.Minute,
			func(err error) bool { var ee *exec.ExitError; return errors.As(err, &ee) }, "last words on stdout"},
		{"hangs", `sleep 300 & sleep 300`, 500 * time.Millisecond,
			func(err error) bool { return errors.Is(err, ErrTimeout) }, "timed out after 500ms"},
		{"unparsable", `echo '{"metric": "p99_ms", "value": 1}'; echo 'Segmentation fault'`, time.Minute,
			func(err error) bool { var pe *ParseError; return errors.As(err, &pe) }, "jsonl output line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := markEnv(t)
			res, err := Run(context.Background(), Command{Argv: []string{"/bin/sh", "-c", tt.script}, Adapter: jl, Timeout: tt.timeout})
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %+v, %v; want an error containing %q", res, err, tt.want)
			}
			if res.Metrics != nil {
				t.Errorf("a failed run gave metrics: %v", res.Metrics)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			t.Log(err)
			noneLeft(t, marker)
		})
	}
}

// TestRunKillsLeftovers: what the tool started and left running is killed
// when it exits, even while it holds the output pipe open.
func TestRunKillsLeftovers(t *testing.T) {
	marker := markEnv(t)
	jl, _ := Lookup("jsonl")
	start := time.Now()
	res, err := Run(context.Background(), Command{
		Argv:    []string{"/bin/sh", "-c", `sleep 300 & echo '{"metric": "p99_ms", "value": 2.5, "unit": "ms"}'`},
		Adapter: jl, Timeout: time.Minute,
	})
	if err != nil || res.Metrics["p99_ms"] != 2.5 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if d := time.Since(start); d > killWait {
		t.Errorf("Run waited %v for the background sleep", d)
	}
	noneLeft(t, marker)
}

func TestRunCancel(t *testing.T) {
	marker := markEnv(t)
	jl, _ := Lookup("jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := Run(ctx, Command{Argv: []string{"/bin/sh", "-c", "sleep 300"}, Adapter: jl})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	noneLeft(t, marker)
}

func TestRunBadCommand(t *testing.T) {
	for _, c := range []Command{
		{},
		{Argv: []string{"./no-such-benchmark"}},
		{Argv: []string{"/no/such/redis-benchmark"}},
		{Argv: []string{"redis-benchmark"}, Dir: "/no/such/dir"},
		{Argv: []string{"pgbench", "--log-prefix=x"}},
	} {
		if _, err := Run(context.Background(), c); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Run(%q) = %v, want a one-line error", c.Argv, err)
		} else {
			t.Log(err)
		}
	}
}
