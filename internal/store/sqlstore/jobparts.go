package sqlstore

import (
	"encoding/json"
	"fmt"

	"github.com/netloom/netloom/internal/store"
)

// JoinParts returns a job's summary as both engines store it in the jobs
// row, from every collector's part of it (raw, by fabric name, own among
// them): own and its encoding data as they are when it is the only part,
// so that one collector's jobs read exactly as it saved them; else the
// join (store.JoinJobParts) and its encoding.
func JoinParts(own *store.JobSummary, data []byte, raw [][]byte) (*store.JobSummary, []byte, error) {
	if len(raw) <= 1 {
		return own, data, nil
	}
	parts := make([]store.JobSummary, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &parts[i]); err != nil {
			return nil, nil, fmt.Errorf("part %d of job %s: decoding its summary: %w", i, own.ID, err)
		}
	}
	js := store.JoinJobParts(parts)
	b, err := json.Marshal(&js)
	if err != nil {
		return nil, nil, fmt.Errorf("joined summary of job %s: %w", own.ID, err)
	}
	return &js, b, nil
}

// DecodePart is JobPart's answer from its query's result: the summary b,
// or err (noRows: the collector of fabric saved no part of job id).
func DecodePart(id, fabric string, b []byte, err error, noRows bool) (*store.JobSummary, error) {
	switch {
	case noRows:
		return nil, fmt.Errorf("fabric %q's part of job %q: %w", fabric, id, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("fabric %q's part of job %q: %w", fabric, id, err)
	}
	var js store.JobSummary
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("fabric %q's part of job %q: decoding its summary: %w", fabric, id, err)
	}
	return &js, nil
}
