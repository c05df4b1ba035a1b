package profiles

import (
	"bytes"
	"errors"
	"testing"
)

func TestBuiltinsLintClean(t *testing.T) {
	ps := Builtins()
	if len(ps) != 8 {
		t.Errorf("%d builtins, want 8", len(ps))
	}
	for _, p := range ps {
		own := p.MachineShape
		for _, b := range ShippedBackends() {
			for _, opt := range []LintOptions{{Backend: b}, {Backend: b, Shape: &own, Strict: true}} {
				if fs := Lint(p, opt); len(fs) > 0 {
					t.Errorf("%s on %s: %s", p.ID, b, dump(fs))
				}
			}
		}
	}
}

// TestBuiltinsExplainThemselves: each builtin carries its rationale in
// comments, at the top and for every group.
func TestBuiltinsExplainThemselves(t *testing.T) {
	for _, p := range Builtins() {
		src, err := BuiltinSource(p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(src, []byte("# "+p.ID+":")) {
			t.Errorf("%s: no rationale at the top", p.ID)
		}
		// The line before every [[thread_groups]] is a comment.
		lines := bytes.Split(src, []byte("\n"))
		for i, l := range lines {
			if bytes.Equal(l, []byte("[[thread_groups]]")) && (i == 0 || !bytes.HasPrefix(lines[i-1], []byte("#"))) {
				t.Errorf("%s: line %d: a thread group without a comment", p.ID, i+1)
			}
		}
	}
}

// TestBuiltinsClassifyRealThreads classifies thread names observed on real
// servers (see each builtin's comments) and checks where they land.
func TestBuiltinsClassifyRealThreads(t *testing.T) {
	type th struct {
		comm    string
		leader  bool
		cmdline string
		group   string // "" = no group
	}
	cases := map[string][]th{
		"memcached": {
			{"memcached", true, "memcached -t 4", "dispatcher"},
			{"mc-worker", false, "", "workers"},
			{"mc-lrumaint", false, "", "maintenance"},
			{"mc-log", false, "", "maintenance"},
			{"mc-itemcrawler", false, "", "maintenance"},
		},
		"redis": {
			{"redis-server", true, "redis-server *:6379", "event-loop"},
			{"io_thd_1", false, "", "io-threads"},
			{"bio_aof_fsync", false, "", "background"},
			{"jemalloc_bg_thd", false, "", "background"},
			{"redis-server", true, "redis-rdb-bgsave *:6379", "persistence"},
		},
		"postgres": {
			{"postgres", true, "postgres: walwriter", "walwriter"},
			{"postgres", true, "postgres: checkpointer", "maintenance"},
			{"postgres", true, "postgres: background writer", "maintenance"},
			{"postgres", true, "postgres: autovacuum launcher", "maintenance"},
			{"postgres", true, "postgres: postgres postgres [local] SELECT", "backends"},
			{"postgres", true, "/usr/lib/postgresql/15/bin/postgres -D /data", ""},
		},
		"jvm-service": {
			{"GC Thread#0", false, "", "gc-jit"},
			{"G1 Conc#0", false, "", "gc-jit"},
			{"G1 Main Marker", false, "", "gc-jit"},
			{"C2 CompilerThre", false, "", "gc-jit"},
			{"http-nio-8080-e", false, "", "requests"},
			{"HTTP-Dispatcher", false, "", "requests"},
			{"CompactionExecu", false, "", "compaction"},
			{"VM Thread", false, "", ""},
		},
		"mysql-innodb": {
			{"connection", false, "", "connections"},
			{"one_connection", false, "", "connections"},
			{"ib_io_rd-1", false, "", "innodb-internals"},
			{"page_cleaner", false, "", "innodb-internals"},
			{"sig_handler", false, "", "background"},
			{"mariadbd", false, "", ""}, // MariaDB 10.11 names no thread
			{"mysqld", true, "", ""},
		},
		"pytorch-training": {
			{"pt_data_worker", true, "", "data-workers"},
			{"pt_main_thread", true, "", "main"},
			{"pt_main_thread", false, "", "intra-op"},
			{"python3", true, "", "main"}, // PyTorch 1.13: unnamed
			{"python3", false, "", "intra-op"},
		},
		"llama-cpp": {
			{"llama-server", true, "", "inference"},
			{"llama-server", false, "", "inference"},
		},
		"onnx-inference": {
			{"python3", false, "", "inference"},
		},
	}
	for id, threads := range cases {
		p, err := Builtin(id)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range threads {
			tid := 2
			if x.leader {
				tid = 1
			}
			i := c.Group(Thread{Tid: tid, Tgid: 1, Comm: x.comm, Pcomm: x.comm, Cmdline: x.cmdline})
			got := ""
			if i >= 0 {
				got = p.ThreadGroups[i].Name
			}
			if got != x.group {
				t.Errorf("%s: %q (leader %v, cmdline %q) → %q, want %q", id, x.comm, x.leader, x.cmdline, got, x.group)
			}
		}
	}
}

func TestBuiltinUnknown(t *testing.T) {
	if _, err := Builtin("nope"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("got %v", err)
	}
	if _, err := BuiltinSource("../builtin"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("got %v", err)
	}
}
