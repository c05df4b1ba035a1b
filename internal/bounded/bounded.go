// Package bounded reads whole inputs with a cap on their size, so that a
// hostile or damaged file (or a decompression bomb) costs at most the cap in
// memory and is refused with a message naming the cap.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrTooLarge is wrapped when an input is longer than its cap.
var ErrTooLarge = errors.New("input too large")

// ReadAll reads r to its end, or refuses it once it holds more than limit
// bytes, having read at most limit+1 of them.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
	}
	return b, nil
}

// ReadFile reads the file at path as ReadAll does; errors name the path.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := ReadAll(f, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
