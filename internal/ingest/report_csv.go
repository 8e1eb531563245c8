package ingest

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The offline report's CSV files.

// WriteCSV writes ranks.csv, functions.csv and matrix-<class>-<bytes|msgs>.csv
// into dir.
func WriteCSV(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("csv directory: %w", err)
	}
	var written []string
	write := func(name string, rows [][]string) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		cw := csv.NewWriter(f)
		if err := cw.WriteAll(rows); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	fl := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	rows := [][]string{{"rank", "node", "host", "pid", "wall_seconds", "mpi_seconds", "cpu_user_seconds", "cpu_system_seconds",
		"vm_hwm", "p2p_bytes", "p2p_msgs", "coll_bytes", "coll_msgs", "rma_bytes", "rma_msgs", "intra_node_bytes", "inter_node_bytes"}}
	for _, p := range r.Processes {
		rows = append(rows, []string{strconv.Itoa(p.Rank), p.Node, p.Host, strconv.Itoa(int(p.PID)), fl(p.Wall), fl(p.MPI), fl(p.CPUUser),
			fl(p.CPUSystem), u(p.VmHWM), u(p.Traffic.P2P.Bytes), u(p.Traffic.P2P.Msgs), u(p.Traffic.Coll.Bytes), u(p.Traffic.Coll.Msgs),
			u(p.Traffic.RMA.Bytes), u(p.Traffic.RMA.Msgs), u(p.IntraNode.Bytes), u(p.InterNode.Bytes)})
	}
	if err := write("ranks.csv", rows); err != nil {
		return written, err
	}
	rows = [][]string{{"rank", "function", "calls", "time_ns", "bytes_sent", "bytes_received", "wait_ns"}}
	pr := r.Profile
	for i, rank := range pr.Ranks {
		for k, f := range pr.Functions {
			if pr.Calls[i][k] > 0 || pr.TimeNS[i][k] > 0 {
				wait := uint64(0)
				if len(pr.WaitNS) > 0 {
					wait = pr.WaitNS[i][k]
				}
				rows = append(rows, []string{strconv.Itoa(rank), f, u(pr.Calls[i][k]), u(pr.TimeNS[i][k]), u(pr.Sent[i][k]), u(pr.Received[i][k]), u(wait)})
			}
		}
	}
	if err := write("functions.csv", rows); err != nil {
		return written, err
	}
	for _, c := range Classes {
		for _, m := range []string{"bytes", "msgs"} {
			mx := r.Matrix[c][m]
			if mx == nil {
				continue
			}
			head := []string{"sender\\receiver"}
			for i := range mx {
				head = append(head, strconv.Itoa(i))
			}
			rows = [][]string{head}
			for i, row := range mx {
				line := []string{strconv.Itoa(i)}
				for _, v := range row {
					line = append(line, u(v))
				}
				rows = append(rows, line)
			}
			if err := write(fmt.Sprintf("matrix-%s-%s.csv", c, m), rows); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}
