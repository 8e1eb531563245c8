package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/netloom/netloom/internal/store"
)

// pastOwner is the owner of the stored job of that id, "" when there is
// none (ingest.Options.PastOwner: a job id never changes owner, so another
// user's run under a finished job's id is refused once the job has left
// the live view, as it is while the job is live).
func (d *Daemon) pastOwner(job string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	js, err := d.st.JobSummary(ctx, job)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return js.Owner(), nil
}
