package main

import (
	"fmt"
	"strconv"

	"github.com/dbqueue/dbq"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"
)

func migrateCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Create, roll back or show the job schema (needs DDL rights)",
	})
	var noCheck bool
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(true, func(cmd *cobra.Command, p *goose.Provider) error {
			res, err := p.Up(cmd.Context())
			for _, r := range res {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s (%v)\n", r.Source.Path, r.Duration.Round(1e6))
			}
			if err != nil {
				return fmt.Errorf("migrate up (migrations need DDL rights: CREATE TABLE, CREATE INDEX, DROP): %w", err)
			}
			if len(res) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "already up to date")
			}
			if noCheck {
				return nil
			}
			// What a worker will rely on, checked once the tables exist.
			rs, err := g.check(cmd.Context())
			if err != nil {
				return err
			}
			for _, r := range rs {
				if !r.OK {
					_ = printChecks(cmd.ErrOrStderr(), rs)
					return errCheckFailed
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "check: %d probes passed (dbq check shows them)\n", len(rs))
			return nil
		}),
	}
	up.Flags().BoolVar(&noCheck, "no-check", false, "do not run dbq check after migrating")
	var to string
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the last migration (--to 0: all of them, dropping the tables and their jobs)",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(false, func(cmd *cobra.Command, p *goose.Provider) error {
			if to != "" {
				v, err := strconv.ParseInt(to, 10, 64)
				if err != nil || v < 0 {
					return fmt.Errorf("--to %q: want a version number >= 0", to)
				}
				at, err := p.GetDBVersion(cmd.Context())
				if err != nil {
					return err
				}
				if v > at {
					return fmt.Errorf("--to %d: the schema is at version %d; down goes to a lower version", v, at)
				}
				if v == at {
					fmt.Fprintf(cmd.OutOrStdout(), "already at version %d\n", v)
					return nil
				}
				res, err := p.DownTo(cmd.Context(), v)
				for _, r := range res {
					fmt.Fprintf(cmd.OutOrStdout(), "rolled back %s\n", r.Source.Path)
				}
				return err
			}
			r, err := p.Down(cmd.Context())
			if r != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "rolled back %s\n", r.Source.Path)
			}
			return err
		}),
	}
	down.Flags().StringVar(&to, "to", "", "roll back to this version (0 removes the schema)")
	status := &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(false, func(cmd *cobra.Command, p *goose.Provider) error {
			st, err := p.Status(cmd.Context())
			if err != nil {
				return err
			}
			for _, s := range st {
				when := "pending"
				if !s.AppliedAt.IsZero() {
					when = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%05d  %-28s %s\n", s.Source.Version, s.Source.Path, when)
			}
			return nil
		}),
	}
	cmd.AddCommand(up, down, status)
	return cmd
}

// withMigrator opens the goose provider for --dsn around fn. Only a
// command that creates the schema may create the database (SQLite).
func (g *globals) withMigrator(create bool, fn func(cmd *cobra.Command, p *goose.Provider) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if !create {
			if err := mustExist(g.dsn); err != nil {
				return err
			}
		}
		p, db, err := dbq.Migrator(cmd.Context(), g.dsn, g.config())
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, p)
	}
}
