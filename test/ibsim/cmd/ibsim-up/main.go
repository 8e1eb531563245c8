// Command ibsim-up starts a simulated fabric from a net file and keeps it
// running until interrupted, printing the environment a client needs:
//
//	go run ./test/ibsim/cmd/ibsim-up testdata/fattree.net
//	# then, in another shell: env LD_PRELOAD=... IBSIM_SOCKNAME=... ibnetdiscover
//
// Lines on its standard input go to ibsim's console one at a time. Once
// ibsim has taken a line and printed its prompt again, ibsim-up answers on
// standard output with one line
//
//	console {"cmd":"...","reply":"...","error":"..."}
//
// where reply is what ibsim printed for it and error, present only on
// failure, says why the line could not be sent or what ibsim refused
// (ibsim refuses with a line starting with "#": `# nodeid "x" (x) not
// found`; comments, which it echoes, are no refusal). Programs that drive
// the fabric (the web UI tests) wait for the answer before the next line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
				answer(os.Stdout, f, line)
			}
		}
	}()
	<-ctx.Done()
}

// answer sends one console line and writes the answer line to w.
func answer(w io.Writer, f *ibsim.Fabric, cmd string) {
	a := struct {
		Cmd   string `json:"cmd"`
		Reply string `json:"reply"`
		Error string `json:"error,omitempty"`
	}{Cmd: cmd}
	reply, err := f.ConsoleReply(cmd)
	a.Reply = reply
	if err != nil {
		a.Error = err.Error()
	} else if refused := refusal(reply); refused != "" && !strings.HasPrefix(cmd, "#") { // ibsim echoes comments
		a.Error = fmt.Sprintf("ibsim refused %q: %s", cmd, refused)
	}
	b, _ := json.Marshal(a) // strings only: cannot fail
	fmt.Fprintf(w, "console %s\n", b)
}

// refusal is ibsim's complaint in a reply: its lines starting with "#".
func refusal(reply string) string {
	var bad []string
	for _, l := range strings.Split(reply, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "#") {
			bad = append(bad, strings.TrimSpace(strings.TrimPrefix(l, "#")))
		}
	}
	return strings.Join(bad, "; ")
}
