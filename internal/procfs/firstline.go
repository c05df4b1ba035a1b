package procfs

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// FirstLine returns the first line of a small kernel file (/proc, /sys),
// trimmed; "" for an empty file.
func FirstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		return strings.TrimSpace(sc.Text()), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "", nil
}
