package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/daemon"
)

func userCmd() *cobra.Command {
	return group("user", "manage local accounts: add, del, list",
		userAddCmd(), userDelCmd(), userListCmd())
}

func tokenCmd() *cobra.Command {
	return group("token", "manage API tokens for scripts: add, list, revoke",
		tokenAddCmd(), tokenListCmd(), tokenRevokeCmd())
}

// authFlags declares the options naming the account files and returns
// what resolves them: the option, else the config file's auth block, else
// the default (the same rule as netloom serve).
func authFlags(c *cobra.Command) func() (auth.Config, error) {
	var cfgPath, users, groups, tokens string
	f := c.Flags()
	f.StringVar(&cfgPath, "config", "", "the daemon's YAML config `file`, for its auth: file names")
	f.StringVar(&users, "users", "", "htpasswd `file` (default "+auth.DefaultUsersFile+")")
	f.StringVar(&groups, "groups", "", "group `file` holding the admin role (default "+auth.DefaultGroupsFile+")")
	f.StringVar(&tokens, "tokens", "", "API token `file` (default "+auth.DefaultTokensFile+")")
	return func() (auth.Config, error) {
		var c auth.Config
		if cfgPath != "" {
			cfg, err := daemon.LoadConfig(cfgPath)
			if err != nil {
				return c, err
			}
			c = cfg.Auth
		}
		for _, o := range []struct{ dst, v *string }{{&c.UsersFile, &users}, {&c.GroupsFile, &groups}, {&c.TokensFile, &tokens}} {
			if *o.v != "" {
				*o.dst = *o.v
			}
		}
		return c.WithDefaults(), nil
	}
}

// accountCmd makes a user or token command: its account files are
// resolved before run is called.
func accountCmd(c *cobra.Command, run func(c *cobra.Command, cfg auth.Config, args []string) error) *cobra.Command {
	files := authFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		cfg, err := files()
		if err != nil {
			return err
		}
		return run(c, cfg, args)
	}
	if c.ValidArgsFunction == nil {
		c.ValidArgsFunction = noFiles
	}
	return c
}

func userAddCmd() *cobra.Command {
	var admin, stdin bool
	c := accountCmd(&cobra.Command{
		Use:   "add NAME",
		Short: "add a local account, or set its password and role",
		Long: `Adds a local account to the htpasswd file (bcrypt), or changes the password
of an existing one. With --admin the account is an administrator (sees
every job and the whole fabric); without, a user (sees their own jobs).
The password is read from standard input with --password-stdin, else a
random one is made and printed. A running daemon picks the change up
within a second.

First run:  netloom user add admin --admin`,
		Args: posArgs("NAME"),
	}, func(c *cobra.Command, cfg auth.Config, args []string) error {
		name := args[0]
		var password string
		if stdin {
			line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
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
		if err := auth.SetUser(cfg, name, password, admin); err != nil {
			return err
		}
		role := "user"
		if admin {
			role = "admin"
		}
		stdout := c.OutOrStdout()
		fmt.Fprintf(stdout, "%s: %s (%s) in %s\n", name, role, map[bool]string{true: "password set", false: "password below"}[stdin], cfg.UsersFile)
		if !stdin {
			fmt.Fprintf(stdout, "password: %s\n", password)
		}
		return nil
	})
	c.Flags().BoolVar(&admin, "admin", false, "make the account an administrator (default: a regular user; given on a change, also demotes)")
	c.Flags().BoolVar(&stdin, "password-stdin", false, "read the password from the first line of standard input")
	return c
}

func userDelCmd() *cobra.Command {
	return accountCmd(&cobra.Command{
		Use:   "del NAME",
		Short: "delete an account with its API tokens",
		Long:  "Deletes a local account, its admin role and its API tokens.",
		Args:  posArgs("NAME"),
	}, func(c *cobra.Command, cfg auth.Config, args []string) error {
		if err := auth.DeleteUser(cfg, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.OutOrStdout(), "%s: deleted\n", args[0])
		return nil
	})
}

func userListCmd() *cobra.Command {
	return accountCmd(&cobra.Command{
		Use:   "list",
		Short: "list accounts and their roles",
		Long:  "Lists local accounts with their roles and number of API tokens.",
		Args:  posArgs(),
	}, func(c *cobra.Command, cfg auth.Config, _ []string) error {
		a, err := auth.LoadAccounts(cfg)
		if err != nil {
			return err
		}
		tokens := map[string]int{}
		for _, t := range a.Tokens() {
			tokens[t.User]++
		}
		tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tROLE\tTOKENS")
		for _, u := range a.Users() {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", u, a.Role(u), tokens[u])
		}
		return tw.Flush()
	})
}

func tokenAddCmd() *cobra.Command {
	var label string
	c := accountCmd(&cobra.Command{
		Use:   "add USER",
		Short: "make an API token for a user (printed once)",
		Long: `Makes an API token for USER and prints it once; only its hash is kept.
Scripts send it as "Authorization: Bearer TOKEN" and act with USER's role
(e.g. a Prometheus scraper of /metrics needs an administrator's token).
USER needs no password: tokens also serve single-sign-on users.`,
		Args: posArgs("USER"),
	}, func(c *cobra.Command, cfg auth.Config, args []string) error {
		tok, e, err := auth.AddToken(cfg, args[0], label)
		if err != nil {
			return err
		}
		c.PrintErrf("token %s for %s (shown only now):\n", e.ID, e.User)
		fmt.Fprintln(c.OutOrStdout(), tok)
		return nil
	})
	c.Flags().StringVar(&label, "label", "", "what the token is for, shown by token list")
	return c
}

func tokenListCmd() *cobra.Command {
	return accountCmd(&cobra.Command{
		Use:   "list",
		Short: "list API tokens (never the tokens themselves)",
		Long:  "Lists API tokens: id, user, creation time and label.",
		Args:  posArgs(),
	}, func(c *cobra.Command, cfg auth.Config, _ []string) error {
		a, err := auth.LoadAccounts(cfg)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tUSER\tCREATED\tLABEL")
		for _, t := range a.Tokens() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.User, t.Created.Format("2006-01-02 15:04"), t.Label)
		}
		return tw.Flush()
	})
}

func tokenRevokeCmd() *cobra.Command {
	return accountCmd(&cobra.Command{
		Use:   "revoke ID",
		Short: "revoke an API token by its id",
		Long:  "Revokes the API token with this id (from token list).",
		Args:  posArgs("ID"),
	}, func(c *cobra.Command, cfg auth.Config, args []string) error {
		if err := auth.RevokeToken(cfg, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.OutOrStdout(), "token %s revoked\n", args[0])
		return nil
	})
}
