// Command recordgen writes the code generated from agent.proto's Process
// annotations (package recordgen), or with -check fails when the files
// in the tree differ from what it would write.
//
//	go run ./internal/recordgen/cmd/recordgen [-root DIR] [-check]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/netloom/netloom/internal/recordgen"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "only compare the files with what would be written")
	flag.Parse()
	stale, err := recordgen.Write(*root, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recordgen:", err)
		os.Exit(1)
	}
	for _, p := range stale {
		if *check {
			fmt.Fprintf(os.Stderr, "recordgen: %s is not what %s generates: run make gen\n", p, recordgen.Source)
		} else {
			fmt.Println("wrote", p)
		}
	}
	if *check && len(stale) > 0 {
		os.Exit(1)
	}
}
