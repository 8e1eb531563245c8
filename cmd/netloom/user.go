package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/daemon"
)

func runUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommands(ctx, "user", []command{
		{"add", "add a local account, or set its password and role", userAdd},
		{"del", "delete an account with its API tokens", userDel},
		{"list", "list accounts and their roles", userList},
	}, args, stdout, stderr)
}

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommands(ctx, "token", []command{
		{"add", "make an API token for a user (printed once)", tokenAdd},
		{"list", "list API tokens (never the tokens themselves)", tokenList},
		{"revoke", "revoke an API token by its id", tokenRevoke},
	}, args, stdout, stderr)
}

// authFlags adds the flags naming the account files and returns the
// command's parse: it parses args (options may follow the arguments) and
// resolves the files: flag, else the config file's auth block, else the
// default (the same rule as netloom serve).
func authFlags(fs *flag.FlagSet) func(args []string, minArgs, maxArgs int) (auth.Config, error) {
	cfgPath := fs.String("config", "", "the daemon's YAML config `file`, for its auth: file names")
	users := fs.String("users", "", "htpasswd `file` (default "+auth.DefaultUsersFile+")")
	groups := fs.String("groups", "", "group `file` holding the admin role (default "+auth.DefaultGroupsFile+")")
	tokens := fs.String("tokens", "", "API token `file` (default "+auth.DefaultTokensFile+")")
	return func(args []string, minArgs, maxArgs int) (auth.Config, error) {
		var c auth.Config
		if err := parseMixed(fs, args, minArgs, maxArgs); err != nil {
			return c, err
		}
		if *cfgPath != "" {
			cfg, err := daemon.LoadConfig(*cfgPath)
			if err != nil {
				return c, err
			}
			c = cfg.Auth
		}
		for _, o := range []struct{ dst, v *string }{{&c.UsersFile, users}, {&c.GroupsFile, groups}, {&c.TokensFile, tokens}} {
			if *o.v != "" {
				*o.dst = *o.v
			}
		}
		return c.WithDefaults(), nil
	}
}

func userAdd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("user add", "NAME [options]", `
Adds a local account to the htpasswd file (bcrypt), or changes the password
of an existing one. With --admin the account is an administrator (sees
every job and the whole fabric); without, a user (sees their own jobs).
The password is read from standard input with --password-stdin, else a
random one is made and printed. A running daemon picks the change up
within a second.

First run:  netloom user add admin --admin`, stderr)
	admin := fs.Bool("admin", false, "make the account an administrator (default: a regular user; given on a change, also demotes)")
	stdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	parse := authFlags(fs)
	cfg, err := parse(args, 1, 1)
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	var password string
	if *stdin {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the password: %w", err)
		}
		password = strings.TrimRight(line, "\r\n")
	} else {
		var b [15]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		password = base64.RawURLEncoding.EncodeToString(b[:])
	}
	if err := auth.SetUser(cfg, name, password, *admin); err != nil {
		return err
	}
	role := "user"
	if *admin {
		role = "admin"
	}
	fmt.Fprintf(stdout, "%s: %s (%s) in %s\n", name, role, map[bool]string{true: "password set", false: "password below"}[*stdin], cfg.UsersFile)
	if !*stdin {
		fmt.Fprintf(stdout, "password: %s\n", password)
	}
	return nil
}

func userDel(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("user del", "NAME [options]", "Deletes a local account, its admin role and its API tokens.", stderr)
	parse := authFlags(fs)
	cfg, err := parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := auth.DeleteUser(cfg, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: deleted\n", fs.Arg(0))
	return nil
}

func userList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("user list", "[options]", "Lists local accounts with their roles and number of API tokens.", stderr)
	parse := authFlags(fs)
	cfg, err := parse(args, 0, 0)
	if err != nil {
		return err
	}
	a, err := auth.LoadAccounts(cfg)
	if err != nil {
		return err
	}
	tokens := map[string]int{}
	for _, t := range a.Tokens() {
		tokens[t.User]++
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tROLE\tTOKENS")
	for _, u := range a.Users() {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", u, a.Role(u), tokens[u])
	}
	return tw.Flush()
}

func tokenAdd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token add", "USER [options]", `
Makes an API token for USER and prints it once; only its hash is kept.
Scripts send it as "Authorization: Bearer TOKEN" and act with USER's role
(e.g. a Prometheus scraper of /metrics needs an administrator's token).
USER needs no password: tokens also serve single-sign-on users.`, stderr)
	label := fs.String("label", "", "what the token is for, shown by token list")
	parse := authFlags(fs)
	cfg, err := parse(args, 1, 1)
	if err != nil {
		return err
	}
	tok, e, err := auth.AddToken(cfg, fs.Arg(0), *label)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "token %s for %s (shown only now):\n", e.ID, e.User)
	fmt.Fprintln(stdout, tok)
	return nil
}

func tokenList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token list", "[options]", "Lists API tokens: id, user, creation time and label.", stderr)
	parse := authFlags(fs)
	cfg, err := parse(args, 0, 0)
	if err != nil {
		return err
	}
	a, err := auth.LoadAccounts(cfg)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tCREATED\tLABEL")
	for _, t := range a.Tokens() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.User, t.Created.Format("2006-01-02 15:04"), t.Label)
	}
	return tw.Flush()
}

func tokenRevoke(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token revoke", "ID [options]", "Revokes the API token with this id (from token list).", stderr)
	parse := authFlags(fs)
	cfg, err := parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := auth.RevokeToken(cfg, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "token %s revoked\n", fs.Arg(0))
	return nil
}
