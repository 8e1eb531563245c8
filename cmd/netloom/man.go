package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func manCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "write a man page for every command to DIR",
		Long: `Writes man pages (section 1) for netloom and every one of its commands to
DIR, made from the same declarations as --help: netloom.1,
netloom-fabric-route.1 and so on. Install them into a man1 directory, or
read one in place with man -l.`,
		Example: `  netloom man man1 && man -l man1/netloom-fabric-route.1`,
		Args:    posArgs("DIR"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(c *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			root := c.Root()
			root.DisableAutoGenTag = true
			forMan(root)
			header := &doc.GenManHeader{Section: "1", Source: "Netloom", Manual: "Netloom Manual"}
			if err := doc.GenManTree(root, header, dir); err != nil {
				return fmt.Errorf("writing man pages to %s: %w", dir, err)
			}
			n := 0
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".1") {
					n++
				}
			}
			c.PrintErrf("netloom man: %d man pages in %s\n", n, dir)
			return nil
		},
	}
}

var indented = regexp.MustCompile(`^\s+\S`)

// forMan rewrites every command's long help, written for a terminal, as
// the Markdown cobra turns into man pages: runs of indented lines (tables,
// command examples) become code blocks so that their layout is kept.
func forMan(c *cobra.Command) {
	var b strings.Builder
	inBlock := false
	for _, l := range strings.Split(c.Long, "\n") {
		ind := indented.MatchString(l)
		switch {
		case ind && !inBlock:
			b.WriteString("\n")
			inBlock = true
		case !ind && inBlock && l != "":
			b.WriteString("\n")
			inBlock = false
		}
		if ind {
			b.WriteString("    ")
		}
		b.WriteString(l)
		b.WriteString("\n")
	}
	c.Long = strings.TrimRight(b.String(), "\n")
	for _, s := range c.Commands() {
		forMan(s)
	}
}
