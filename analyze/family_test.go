package analyze

import (
	"strings"
	"testing"
)

func TestFamily(t *testing.T) {
	cases := []struct{ comm, want string }{
		{"ib_io_rd-3", "ib_io_rd"},
		{"wl-worker-2", "wl-worker"},
		{"wl-compute-0", "wl-compute"},
		{"wl-acceptor", "wl-acceptor"},
		{"postgres", "postgres"},
		{"redis-server", "redis-server"},
		{"io_thd_12", "io_thd"},
		{"worker/7", "worker"},
		{"pool:3", "pool"},
		{"GC Thread#3", "GC Thread"},
		{"grpc-0x7f3a", "grpc"},
		{"conn-a1b2c3d4", "conn"},
		{"worker12", "worker"},
		{"python3.11", "python"},
		{"pool-3-thread-12", "pool-3-thread"},
		{"worker-3-2", "worker"},
		{"bio_close_fd", "bio_close_fd"}, // "fd" is a word, not an id
		{"mem-cafe", "mem-cafe"},         // hex letters without a digit stay
		{"12345", "12345"},               // nothing left: keep it
		{"tokio-rt-worker", "tokio-rt-worker"},
		{"ThreadPoolForeg", "ThreadPoolForeg"},
		{"", ""},
	}
	for _, c := range cases {
		if got := Family(c.comm); got != c.want {
			t.Errorf("Family(%q) = %q, want %q", c.comm, got, c.want)
		}
	}
}

// FuzzFamily checks Family's invariants: idempotent, a prefix of the
// trimmed input, and empty only for blank input.
func FuzzFamily(f *testing.F) {
	for _, s := range []string{"ib_io_rd-3", "wl-worker-2", "GC Thread#3", "grpc-0x7f3a", "a-", "0x", "-1", "x 9 9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Family(s)
		if Family(got) != got {
			t.Errorf("Family(%q) = %q, but Family(%q) = %q", s, got, got, Family(got))
		}
		if !strings.HasPrefix(strings.TrimSpace(s), got) {
			t.Errorf("Family(%q) = %q is not a prefix of it", s, got)
		}
		if got == "" && strings.TrimSpace(s) != "" {
			t.Errorf("Family(%q) is empty", s)
		}
	})
}
