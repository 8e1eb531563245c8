package storecopy

import (
	"slices"
	"testing"

	"github.com/netloom/netloom/internal/store/sqlstore"
)

// The jobs table's numeric columns, derived from the sort keys, are the
// ones both engines fill.
func TestJobMetrics(t *testing.T) {
	if got := jobMetrics(); !slices.Equal(got, sqlstore.JobMetricColumns) {
		t.Errorf("jobMetrics() = %v, want sqlstore.JobMetricColumns %v", got, sqlstore.JobMetricColumns)
	}
}
