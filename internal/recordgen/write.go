package recordgen

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
)

// Generate reads the declaration under root and generates every file.
func Generate(root string) (map[string][]byte, error) {
	f, err := os.Open(filepath.Join(root, Source))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rec, err := Parse(f)
	if err != nil {
		return nil, err
	}
	return Files(rec)
}

// Write generates the files under root and writes those that differ
// (with check, writes nothing); it returns their paths, sorted.
func Write(root string, check bool) ([]string, error) {
	files, err := Generate(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for path, src := range files {
		full := filepath.Join(root, path)
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, src) {
			continue
		}
		stale = append(stale, path)
		if !check {
			if err := os.WriteFile(full, src, 0o644); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(stale)
	return stale, nil
}
