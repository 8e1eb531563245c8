package place

import (
	"bufio"
	"fmt"
	"io"
)

// Formats are the placement files Write makes.
var Formats = []string{"openmpi", "mpich", "slurm"}

// FileName is a conventional name for a format's file.
func FileName(format string) string {
	switch format {
	case "mpich":
		return "machinefile"
	case "slurm":
		return "hostfile"
	}
	return "rankfile"
}

// Write writes the mapping as a launcher's placement file:
//
//   - openmpi: a rankfile for mpirun --rankfile, "rank R=NODE slot=CORE";
//   - mpich: a Hydra machine file for mpiexec -f, "NODE:COUNT" lines in rank
//     order (consecutive ranks on one node share a line);
//   - slurm: a host file for SLURM_HOSTFILE with srun --distribution=arbitrary,
//     one node name per rank.
func Write(w io.Writer, format string, m []RankPlace) error {
	bw := bufio.NewWriter(w)
	switch format {
	case "openmpi":
		for _, r := range m {
			if r.Core >= 0 {
				fmt.Fprintf(bw, "rank %d=%s slot=%d\n", r.Rank, r.Node, r.Core)
			} else {
				fmt.Fprintf(bw, "rank %d=%s slot=*\n", r.Rank, r.Node)
			}
		}
	case "mpich":
		for i := 0; i < len(m); {
			j := i + 1
			for j < len(m) && m[j].Node == m[i].Node {
				j++
			}
			fmt.Fprintf(bw, "%s:%d\n", m[i].Node, j-i)
			i = j
		}
	case "slurm":
		for _, r := range m {
			fmt.Fprintln(bw, r.Node)
		}
	default:
		return fmt.Errorf("format %q: want openmpi, mpich or slurm", format)
	}
	return bw.Flush()
}
