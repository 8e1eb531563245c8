// Command ibsim-up starts a simulated fabric from a net file and keeps it
// running until interrupted, printing the environment a client needs:
//
//	go run ./test/ibsim/cmd/ibsim-up testdata/fattree.net
//	# then, in another shell: env LD_PRELOAD=... IBSIM_SOCKNAME=... ibnetdiscover
//
// Lines typed on its standard input go to ibsim's console.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/netloom/netloom/test/ibsim"
)

func main() {
	var opt ibsim.Options
	flag.IntVar(&opt.Nodes, "N", 0, "ibsim -N (max nodes)")
	flag.IntVar(&opt.Switches, "S", 0, "ibsim -S (max switches)")
	flag.IntVar(&opt.Ports, "P", 0, "ibsim -P (max ports)")
	flag.DurationVar(&opt.Timeout, "timeout", 5*time.Minute, "start-up step timeout")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ibsim-up [-N nodes -S switches -P ports] NETFILE")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	f, err := ibsim.Start(ctx, flag.Arg(0), opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Stop()
	fmt.Printf("fabric up in %s, logs in %s\nexport %s\n", time.Since(t0).Round(time.Millisecond), f.Dir, strings.Join(f.Env(), " "))
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				if err := f.Console(line); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		}
	}()
	<-ctx.Done()
}
