package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadAll(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int64
		err   bool
	}{
		{"", 0, false},
		{"abc", 3, false},
		{"abcd", 3, true},
		{"", 3, false},
	} {
		b, err := ReadAll(strings.NewReader(tc.in), tc.limit)
		if tc.err {
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 3 bytes") {
				t.Errorf("ReadAll(%q, %d) = %q, %v; want ErrTooLarge naming the cap", tc.in, tc.limit, b, err)
			}
			continue
		}
		if err != nil || string(b) != tc.in {
			t.Errorf("ReadAll(%q, %d) = %q, %v", tc.in, tc.limit, b, err)
		}
	}
}

func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 5); err != nil || string(b) != "12345" {
		t.Fatalf("ReadFile at the cap = %q, %v", b, err)
	}
	if _, err := ReadFile(p, 4); !errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), p+": more than 4 bytes") {
		t.Fatalf("ReadFile over the cap: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none"), 4); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: %v", err)
	}
}
