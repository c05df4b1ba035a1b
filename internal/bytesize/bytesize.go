// Package bytesize reads and writes byte counts in powers of 1024: the
// sizes a person types (16MiB) and the ones a report prints (1.5 MiB).
package bytesize

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var sizeRE = regexp.MustCompile(`^(\d+)\s*([KMGT]i?B?|B)?$`)

// Parse reads a byte count such as 4096, 64KiB, 16MiB or 1G: K, M, G and T
// are powers of 1024 with or without "i" and "B".
func Parse(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 4096, 64KiB, 16MiB, 1GiB)", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}
	if m[2] != "" && m[2] != "B" {
		sh := shift[m[2][0]]
		if n > (1<<62)>>sh {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n <<= sh
	}
	return n, nil
}

// Format writes n bytes in the largest unit it reaches, with one decimal:
// "512 B", "1.5 KiB", "16.0 MiB", "2.0 GiB".
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
